// A2A-Version negotiation (A2A v1.0 §3.6). The endpoint serves 1.0 only. A request says its version in the
// `A2A-Version` header (or the `A2A-Version` query parameter, §3.6.1); a patch number is ignored (§3.6).
// An empty or missing value means 0.3 (§3.6.2: "Agents MUST interpret empty value as 0.3"), which is not
// served: a v0.3 client sends v0.3 shapes and reads v0.3 answers, so answering it in 1.0 would mislead it.
// @a2a-js/sdk 1.3.0 sends `A2A-Version: 1.0` with every request to an interface declaring 1.0.

export const SUPPORTED_VERSION = '1.0';

/** The v0.3 JSON-RPC method names and their v1.0 names, for a refusal that says what to send instead. */
export const V03_METHODS: Readonly<Record<string, string>> = {
  'message/send': 'SendMessage',
  'message/stream': 'SendStreamingMessage',
  'tasks/get': 'GetTask',
  'tasks/list': 'ListTasks',
  'tasks/cancel': 'CancelTask',
  'tasks/resubscribe': 'SubscribeToTask',
  'tasks/pushNotificationConfig/set': 'CreateTaskPushNotificationConfig',
  'tasks/pushNotificationConfig/get': 'GetTaskPushNotificationConfig',
  'tasks/pushNotificationConfig/list': 'ListTaskPushNotificationConfigs',
  'tasks/pushNotificationConfig/delete': 'DeleteTaskPushNotificationConfig',
  'agent/getAuthenticatedExtendedCard': 'GetExtendedAgentCard',
};

/** The version a request asked for, as sent (trimmed): '' when it sent none. */
export function requestedVersion(header: string | string[] | undefined, query: string | null): string {
  const value = Array.isArray(header) ? header[0] : header;
  return (value ?? query ?? '').trim();
}

/** Whether the requested version is the one served: its Major.Minor is 1.0. */
export function servedVersion(requested: string): boolean {
  return /^1\.0(\.\d+)?$/.test(requested);
}

/** The -32009 message: what was asked, what is served, and how to ask for it. */
export function versionRefusal(requested: string, method: string): string {
  const asked = requested === '' ? 'no A2A-Version, which means 0.3 (A2A §3.6.2)' : `A2A-Version ${requested}`;
  const v1 = V03_METHODS[method];
  const hint = v1 ? `; ${method} is ${v1} in 1.0` : '';
  return `Version not supported: the request has ${asked}; this endpoint serves A2A ${SUPPORTED_VERSION} only: send the header A2A-Version: ${SUPPORTED_VERSION}${hint}`;
}
