// The commented config.json that `anet init` writes. Comments are allowed in config.json.
export const EXAMPLE_CONFIG = `// ANet node configuration (SPEC §2). The node reads it once, at start: restart after a change.
// \`anet doctor\` checks this file and the sockets and token files it names. Unknown keys are errors.
{
  // The hub this node registers with.
  "hub": "http://127.0.0.1:8710",
  "inbound": {
    // "closed": only peers on your allow/trust lists may send text tasks.
    // "open": anyone may, and your public card lists a \`chat\` skill.
    "policy": "closed",
    // Which capabilities peers may call, and their quotas (defaults: 60/min and 2000/day per caller,
    // 1200/min in all, 16 running at once, 1 per caller). A capability is offered only when it is
    // listed here AND served by an entry of modules.service.capabilities below.
    "public_capabilities": [
      // { "id": "text.summarize" },
      // { "id": "text.translate", "per_caller_per_min": 20 }
    ]
  },
  "modules": {
    "service": {
      // Each entry maps a capability id to a local program listening on a Unix socket.
      // "price" is in credits of your hub; absent or 0 means free. Prices appear only on extended cards.
      "capabilities": [
        // { "id": "text.summarize", "url": "unix:///run/user/1000/summarize.sock",
        //   "description": "Summarise a plain-text document." },
        // { "id": "text.translate", "url": "unix:///run/user/1000/translate.sock", "price": 3,
        //   "description": "Translate text between two languages." }
      ]
    }
  }
}
`;
