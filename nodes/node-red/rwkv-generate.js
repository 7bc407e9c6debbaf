// Node-RED entry for the rwkv-generate node; the implementation is compiled TypeScript shared with n8n.
module.exports = function (RED) {
  require('../../dist/nodes/node-red/support/generate-node').register(RED);
};
