// Host-agnostic glue used by both the n8n nodes and the Node-RED nodes.

export * from './parameter-error';
export * from './coerce';
export * from './engine-provider';
export * from './model-config';
export * from './chat-prompt';
export * from './json-schema-check';
export * from './generate-request';
export * from './generation-runner';
export * from './progress-status';
export * from './choose-request';
export * from './embed-request';
export * from './state-operation';
