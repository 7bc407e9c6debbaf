// Node-RED entry for the rwkv-load-state node; the implementation is compiled TypeScript shared with n8n.
module.exports = function (RED) {
  require('../../dist/nodes/node-red/support/load-state-node').register(RED);
};
