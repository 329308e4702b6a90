import { Inject, Injectable, Logger, OnApplicationBootstrap, OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { ResolvedDuraflowOptions } from '../config/resolved-options';
import { WorkflowMetadataAccessor } from '../discovery/workflow-metadata.accessor';
import { findWorkflowProviders } from '../discovery/workflow-providers';
import { WorkflowRegistry } from '../discovery/workflow.registry';
import { RESOLVED_DURAFLOW_OPTIONS } from '../domain/duraflow.constants';
import { SchemaNotReadyError } from '../domain/errors';
import { WorkflowEventOptions } from '../domain/event-options';
import { isReplayBoot } from '../replay/replay-boot';
import { checkSubscription } from './event-subscription.checks';
import { EventSubscriptionRegistry } from './event-subscription.registry';
import { EventSubscriptionStore } from './event-subscription.store';

/**
 * Finds the workflows' subscriptions at module init (after the WorkflowExplorer: a subscription
 * belongs to a registered workflow), checks them (a mistake stops the boot), and at bootstrap
 * writes them to `duraflow_event_subscriptions`, so every publish (from any node or from SQL)
 * knows them. For each workflow this process registers, its rows become this process's
 * declaration: the last node to boot with a workflow defines its subscriptions.
 */
@Injectable()
export class EventSubscriptionExplorer implements OnModuleInit, OnApplicationBootstrap {
  private readonly logger = new Logger('Duraflow');
  private saved = false;

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly metadata: WorkflowMetadataAccessor,
    private readonly workflows: WorkflowRegistry,
    private readonly registry: EventSubscriptionRegistry,
    private readonly store: EventSubscriptionStore,
    @Inject(RESOLVED_DURAFLOW_OPTIONS) private readonly options: ResolvedDuraflowOptions,
  ) {}

  onModuleInit(): void {
    const declared = new Map<string, WorkflowEventOptions>();
    for (const { meta } of findWorkflowProviders(this.discovery, this.metadata)) declared.set(meta.name, meta.options);
    for (const definition of this.options.workflows) declared.set(definition.name, definition.options);
    for (const [name, options] of declared) {
      if (options.on === undefined && options.debounce === undefined && options.batch === undefined) continue;
      // The newest registered version's declaration wins (every version is registered under one name).
      const newest = this.workflows.get(name);
      const subscription = checkSubscription(name, options, {
        workflowVersion: newest.declaredVersion ?? null,
        maxRetries: newest.maxRetries ?? this.options.maxRetries,
      });
      this.registry.register(subscription);
    }
    const all = this.registry.all();
    if (all.length) this.logger.log(`Event subscriptions: ${all.map((s) => `${s.workflowName} on ${s.events.join(', ')}`).join('; ')}`);
  }

  async onApplicationBootstrap(): Promise<void> {
    if (isReplayBoot() || !this.workflows.names().length) return;
    try {
      await this.ensureSaved();
    } catch (error) {
      // Never stops the host app. A database without the migrations (a submit-only node may boot
      // on one): written at this node's first publish once they ran, as its other calls heal.
      if (error instanceof SchemaNotReadyError) return;
      this.logger.warn(
        `Could not write this node's event subscriptions (${error instanceof Error ? error.message : String(error)}); ` +
          `they are written at this node's first publish, or when it restarts.`,
      );
    }
  }

  /** Writes this node's subscriptions once (at boot, or at the first publish if the boot's write failed). */
  async ensureSaved(): Promise<void> {
    if (this.saved || isReplayBoot() || !this.workflows.names().length) return;
    await this.store.save(this.workflows.names(), this.registry.all());
    this.saved = true;
  }
}
