// Errors. Every error answer of the server becomes an APIError (or the
// subclass of its code) with the HTTP status, the stable code and the
// server's message, which says what to fix; the codes and their statuses are
// those of api/openapi.yaml and of the Go SDK's errors.go.

/** The base class of every error this package throws. */
export class WithRuntimeError extends Error {
  override name = "WithRuntimeError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * No Runtime server is configured: neither WITHRUNTIME_URL nor the config
 * file ~/.config/withruntime/config.json. The message says how to configure
 * one.
 */
export class NotConfiguredError extends WithRuntimeError {
  override name = "NotConfiguredError";
}

/**
 * A wait on a server that accepted the connection ran out (it may be
 * stopped or overloaded): no answer headers within the client's
 * responseTimeoutSeconds (plus what the call runs first), or, with `idle`,
 * a stream or download that sent nothing for idleTimeoutSeconds.
 */
export class ServerTimeoutError extends WithRuntimeError {
  override name = "ServerTimeoutError";
  /** The server's base URL. */
  readonly server: string;
  /** The request's method and path, such as "GET" "/v1/sandboxes". */
  readonly method: string;
  readonly path: string;
  /** The wait was for a stream's next byte, not for the answer's headers. */
  readonly idle: boolean;
  /** The bound that ran out, in seconds. */
  readonly seconds: number;
  constructor(server: string, method: string, path: string, seconds: number, idle: boolean) {
    const secs = seconds < 10 && !Number.isInteger(seconds) ? `${seconds.toFixed(1)} s` : `${Math.round(seconds)} s`;
    super(
      idle
        ? `withruntime: the answer of the Runtime server at ${server} to ${method} ${path} sent nothing for ${secs} ` +
            "(it accepted the connection: it may be stopped or overloaded); the client's idleTimeoutSeconds waits longer"
        : `withruntime: the Runtime server at ${server} did not answer ${method} ${path} within ${secs} ` +
            "(it accepted the connection: it may be stopped or overloaded); the client's responseTimeoutSeconds waits longer",
    );
    this.server = server;
    this.method = method;
    this.path = path;
    this.idle = idle;
    this.seconds = seconds;
  }
}

/**
 * A terminal's connection ended before its program did (disconnect, a
 * network failure, the sandbox paused or stopped). The program may still
 * run: `sbx.pty.connect(pid)` connects again.
 */
export class TerminalDisconnectedError extends WithRuntimeError {
  override name = "TerminalDisconnectedError";
}

/** An error answer from the server, or an error event that ended an exec stream. */
export class APIError extends WithRuntimeError {
  override name = "APIError";
  /** The HTTP status (for an error event, the status its code maps to). */
  readonly status: number;
  /** The stable error code, such as "not_found" or "lease_ended". */
  readonly code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** 400 bad_request: the request was invalid; the message says what to fix. */
export class BadRequestError extends APIError {
  override name = "BadRequestError";
}
/** 401 unauthorized: the API key is missing, wrong or revoked. */
export class UnauthorizedError extends APIError {
  override name = "UnauthorizedError";
}
/** 403 forbidden: the sandbox refused the operation (permission denied, read-only filesystem). */
export class ForbiddenError extends APIError {
  override name = "ForbiddenError";
}
/** 404 not_found: no such sandbox, process, file or directory. */
export class NotFoundError extends APIError {
  override name = "NotFoundError";
}
/**
 * 408 timeout: the server gave up waiting; also 504 agent_timeout: the
 * sandbox's agent did not answer within the server's bound. (A bound of
 * this client on a silent server is a ServerTimeoutError.)
 */
export class TimeoutError extends APIError {
  override name = "TimeoutError";
}
/** 409 conflict: wrong state (a sandbox still starting, a file that already exists, a directory not empty). */
export class ConflictError extends APIError {
  override name = "ConflictError";
}
/**
 * 409 sandbox_paused: the sandbox is paused (resume it, or create it with
 * autoResume), or was paused while the request ran (the command it ran was
 * killed). A ConflictError, as its status is 409.
 */
export class SandboxPausedError extends ConflictError {
  override name = "SandboxPausedError";
}
/**
 * 410 lease_ended: the sandbox's lease ended and the server destroyed it.
 * Create a new sandbox; extend leases with setTimeout before they end.
 */
export class LeaseEndedError extends APIError {
  override name = "LeaseEndedError";
}
/** 410 sandbox_stopped: the sandbox was destroyed (by kill or another client) or failed. */
export class SandboxStoppedError extends APIError {
  override name = "SandboxStoppedError";
}
/** 413 too_large: an upload or request body is over the server's cap. */
export class TooLargeError extends APIError {
  override name = "TooLargeError";
}
/** 416 range_not_satisfiable: a ranged download (offset) starts past the end of the file. */
export class RangeNotSatisfiableError extends APIError {
  override name = "RangeNotSatisfiableError";
}
/** 429 rate_limited: slow down and retry. */
export class RateLimitedError extends APIError {
  override name = "RateLimitedError";
}
/** 500 internal: the server failed; its log has details. */
export class InternalError extends APIError {
  override name = "InternalError";
}
/**
 * 501 not_implemented: the sandbox cannot do this, such as runCode in a
 * sandbox whose template has no kernels (create it with template
 * "code-interpreter").
 */
export class UnsupportedError extends APIError {
  override name = "UnsupportedError";
}
/** 503 unavailable: no capacity for another sandbox now; retry later. */
export class UnavailableError extends APIError {
  override name = "UnavailableError";
}
/** 507 no_space: the sandbox's disk is full. */
export class NoSpaceError extends APIError {
  override name = "NoSpaceError";
}

/**
 * 400 cost_cap: the sandbox's first lease could cost more than the create's
 * maxCostMicros. The message gives the worst case in micro-dollars and how
 * it was computed (every vCPU busy plus the memory size, for the whole
 * lease, at the server's prices). A BadRequestError, as its status is 400.
 */
export class CostCapError extends BadRequestError {
  override name = "CostCapError";
}
/**
 * 429 spending_limit: the API key reached its daily spending limit
 * (dailyLimitMicros); its creates are refused until midnight UTC. The
 * message gives the key's spend, its limit and when it resets. A
 * RateLimitedError, as its status is 429.
 */
export class SpendingLimitError extends RateLimitedError {
  override name = "SpendingLimitError";
}

type APIErrorClass = new (status: number, code: string, message: string) => APIError;

/** Each error code of the API: its class and HTTP status. */
const codes: Record<string, [APIErrorClass, number]> = {
  bad_request: [BadRequestError, 400],
  unauthorized: [UnauthorizedError, 401],
  forbidden: [ForbiddenError, 403],
  not_found: [NotFoundError, 404],
  timeout: [TimeoutError, 408],
  agent_timeout: [TimeoutError, 504],
  conflict: [ConflictError, 409],
  sandbox_paused: [SandboxPausedError, 409],
  lease_ended: [LeaseEndedError, 410],
  sandbox_stopped: [SandboxStoppedError, 410],
  too_large: [TooLargeError, 413],
  range_not_satisfiable: [RangeNotSatisfiableError, 416],
  rate_limited: [RateLimitedError, 429],
  internal: [InternalError, 500],
  not_implemented: [UnsupportedError, 501],
  unavailable: [UnavailableError, 503],
  no_space: [NoSpaceError, 507],
  cost_cap: [CostCapError, 400],
  spending_limit: [SpendingLimitError, 429],
};

/** The class for a code this package does not know (a newer server), by status. */
const byStatus: Record<number, APIErrorClass> = {
  400: BadRequestError,
  401: UnauthorizedError,
  403: ForbiddenError,
  404: NotFoundError,
  408: TimeoutError,
  504: TimeoutError,
  409: ConflictError,
  410: SandboxStoppedError,
  413: TooLargeError,
  416: RangeNotSatisfiableError,
  429: RateLimitedError,
  500: InternalError,
  501: UnsupportedError,
  503: UnavailableError,
  507: NoSpaceError,
};

/** The HTTP status an error code maps to (500 if unknown). */
export function statusOfCode(code: string): number {
  return codes[code]?.[1] ?? 500;
}

/**
 * Builds the APIError for an error answer: the class of its code, or for a
 * code this package does not know, of its status.
 */
export function apiError(status: number, code: string, message: string): APIError {
  const cls = codes[code]?.[0] ?? byStatus[status] ?? APIError;
  return new cls(status, code, message);
}
