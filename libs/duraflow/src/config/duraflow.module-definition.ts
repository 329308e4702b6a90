import { ConfigurableModuleBuilder } from '@nestjs/common';
import { DuraflowModuleOptions } from './duraflow.options';

export const {
  ConfigurableModuleClass: DuraflowConfigurableModule,
  MODULE_OPTIONS_TOKEN: DURAFLOW_MODULE_OPTIONS,
  OPTIONS_TYPE: DURAFLOW_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: DURAFLOW_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<DuraflowModuleOptions>({ moduleName: 'Duraflow' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
