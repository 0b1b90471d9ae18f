// bench/calls' second baseline, in its own process: the echo service (the Unix socket named by argv[2])
// behind the official A2A SDK's JSON-RPC server — DefaultRequestHandler, an in-memory task store, an
// AgentExecutor and the SDK's express transport — on plain HTTP on a loopback port: no encryption, no
// relay, no signature, no journal. What a user would write instead of a relayed, signed, encrypted call.
// Prints `ready on <base url>` once it listens. Stops on SIGTERM.
import { Agent, createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AGENT_CARD_PATH, TaskState, type AgentCard, type Task } from '@a2a-js/sdk';
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, type AgentExecutor, type RequestContext } from '@a2a-js/sdk/server';
import { agentCardHandler, jsonRpcHandler, UserBuilder } from '@a2a-js/sdk/server/express';

/** The little of express used here (a devDependency: the SDK's optional peer for its express transport),
 * typed here since @types/express is not installed. */
interface ExpressApp {
  (req: IncomingMessage, res: ServerResponse): void;
  use(path: string, handler: unknown): void;
}

const socketPath = process.argv[2];
if (!socketPath) throw new Error('usage: a2a-server.js SOCKET');

// A kept-alive connection to the service, as the provider keeps one (src/node/provider: 1 s idle).
const agent = new Agent({ keepAlive: true });

/** One POST of the arguments to the echo service; its JSON answer. */
function postEcho(args: unknown): Promise<unknown> {
  const body = Buffer.from(JSON.stringify(args));
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath, path: '/', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': body.length } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          res.statusCode === 200 ? resolve(JSON.parse(Buffer.concat(chunks).toString())) : reject(new Error(`service ${res.statusCode}`)),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

/** The finished task: the service's answer as one data part, like an anet call's result. */
function completed(ctx: RequestContext, result: unknown): Task {
  const part = { content: { $case: 'data' as const, value: result }, metadata: undefined, filename: '', mediaType: 'application/json' };
  return {
    id: ctx.taskId,
    contextId: ctx.contextId,
    status: { state: TaskState.TASK_STATE_COMPLETED, message: undefined, timestamp: new Date().toISOString() },
    artifacts: [{ artifactId: 'result', name: 'result', description: '', parts: [part], metadata: undefined, extensions: [] }],
    history: [ctx.userMessage],
    metadata: undefined,
  };
}

const executor: AgentExecutor = {
  async execute(ctx, bus) {
    const content = ctx.userMessage.parts[0]?.content;
    const args = content?.$case === 'data' ? content.value : null;
    bus.publish(AgentEvent.task(completed(ctx, await postEcho(args))));
  },
  // An echo ends before a cancel could reach it.
  cancelTask: async () => {},
};

function card(base: string): AgentCard {
  const json = ['application/json'];
  return {
    name: 'echo',
    description: 'demo.echo behind the A2A SDK (bench/calls baseline)',
    supportedInterfaces: [{ url: `${base}/a2a/jsonrpc`, protocolBinding: 'JSONRPC', tenant: '', protocolVersion: '1.0' }],
    provider: undefined,
    version: '1.0.0',
    capabilities: { streaming: false, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: json,
    defaultOutputModes: json,
    skills: [
      {
        id: 'demo.echo',
        name: 'echo',
        description: 'the arguments back',
        tags: [],
        examples: [],
        inputModes: json,
        outputModes: json,
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

const { default: express } = (await import('express' as string)) as { default: () => ExpressApp };
const app = express();
const server = createServer(app);
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
// The card names its own URL, so the routes go on once the port is known.
const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const requestHandler = new DefaultRequestHandler(card(base), new InMemoryTaskStore(), executor);
app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
app.use('/a2a/jsonrpc', jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));
process.once('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
console.log(`ready on ${base}`);
