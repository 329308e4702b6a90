/** Injection token of the engine's EngineConfig. */
export const ENGINE_CONFIG = Symbol('ENGINE_CONFIG');
