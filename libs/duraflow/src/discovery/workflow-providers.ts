import { Type } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { WorkflowMetadata } from '../decorators/workflow.decorator';
import { WorkflowMetadataAccessor } from './workflow-metadata.accessor';

/** A provider class decorated with @Workflow, with what the decorator wrote. */
export interface WorkflowProvider {
  wrapper: InstanceWrapper;
  metatype: Type;
  meta: WorkflowMetadata;
}

/** The app's @Workflow classes, each once (a class registered in several modules is one workflow). */
export function findWorkflowProviders(discovery: DiscoveryService, metadata: WorkflowMetadataAccessor): WorkflowProvider[] {
  const found: WorkflowProvider[] = [];
  const seen = new Set<Function>();
  for (const wrapper of discovery.getProviders()) {
    const metatype = wrapper.metatype as Type | undefined;
    if (!metatype || typeof metatype !== 'function' || seen.has(metatype)) continue;
    const meta = metadata.getWorkflowMetadata(metatype);
    if (!meta) continue;
    seen.add(metatype);
    found.push({ wrapper, metatype, meta });
  }
  return found;
}
