export * from '../domain/errors/error-status';
export * from './duraflow-exception.filter';
