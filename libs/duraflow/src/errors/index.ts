export * from './duraflow.error';
export * from './definition.errors';
export * from './submit.errors';
export * from './task.errors';
export * from './step.errors';
export * from './saga.errors';
export * from './dependency.errors';
export * from './dashboard.errors';
