export * from './duraflow-error-status';
export * from './duraflow-exception.filter';
