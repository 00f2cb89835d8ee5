/**
 * SDK boundary — failing one pending upstream request from inside its
 * transport. The SDK's Protocol can only be told that a request failed by a
 * JSON-RPC error response with that request's id; an upstream message over
 * `gateway.upstream.maxMessageBytes` is never parsed, so the transport hands
 * the client such a response in its place (design LM-6).
 *
 * Relies on Protocol._onresponse building the error it rejects with from the response's
 * `error.data` object by reference (no copy), so that errors.ts can map the
 * SDK's error back to the GatewayError it stands for (deliveredErrorData).
 * Canary: test/unit/sdk-canaries.test.ts ("a delivered error response …").
 */
import { ErrorCode, type JSONRPCErrorResponse, type RequestId } from "@modelcontextprotocol/sdk/types.js";
import { deliveredErrorData, type GatewayError } from "../errors.js";

/** The error response that fails request `id` with `err` (deliver it through the transport's onmessage). */
export function errorResponseFor(id: RequestId, err: GatewayError): JSONRPCErrorResponse {
  return { jsonrpc: "2.0", id, error: { code: ErrorCode.InternalError, message: `${err.code}: ${err.message}`, data: deliveredErrorData(err) } };
}
