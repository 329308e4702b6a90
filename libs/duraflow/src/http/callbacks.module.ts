import { DynamicModule, Inject, Injectable, Module, OnModuleInit } from '@nestjs/common';
import { callbackRoutePath } from '../config/callbacks.options';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { InvalidDuraflowOptionsError } from '../domain/errors';
import { mountCallbacksController } from './callbacks.controller';

const MOUNTED_PATH = 'DURAFLOW_CALLBACKS_MOUNTED_PATH';

/** At boot: the route is mounted where DuraflowModule's `callbacks.path` says its urls point. */
@Injectable()
class CallbackRouteCheck implements OnModuleInit {
  constructor(
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
    @Inject(MOUNTED_PATH) private readonly mountedPath: string,
  ) {}

  onModuleInit(): void {
    const configured = this.options.callbacks;
    if (!configured) {
      throw new InvalidDuraflowOptionsError(
        'callbacks',
        'must be given to DuraflowModule (baseUrl, secret) when DuraflowCallbacksModule is imported.',
      );
    }
    if (configured.path !== this.mountedPath) {
      throw new InvalidDuraflowOptionsError(
        'callbacks.path',
        `is "${configured.path}" but DuraflowCallbacksModule mounted the route at "${this.mountedPath}": give both the same path.`,
      );
    }
  }
}

/**
 * The route callback urls point at, for an app that configures DuraflowModule with
 * `forRootAsync` (`forRoot({ callbacks })` mounts it by itself): import
 * `DuraflowCallbacksModule.forRoot({ path })` with the path the options will give.
 */
@Module({})
export class DuraflowCallbacksModule {
  static forRoot(options: { path?: string } = {}): DynamicModule {
    const path = callbackRoutePath(options.path);
    return {
      module: DuraflowCallbacksModule,
      controllers: [mountCallbacksController(path)],
      providers: [{ provide: MOUNTED_PATH, useValue: path }, CallbackRouteCheck],
    };
  }
}
