// Node-RED entry for the rwkv-model node; the implementation is compiled TypeScript shared with n8n.
module.exports = function (RED) {
  require('../../dist/nodes/node-red/support/model-config-node').registerModelConfigNode(RED);
};
