// Node-RED entry for the rwkv-embed node; the implementation is compiled TypeScript shared with n8n.
module.exports = function (RED) {
  require('../../dist/nodes/node-red/support/embed-node').register(RED);
};
