/**
 * JWT access tokens (RFC 9068) checked with jose against the issuer's keys:
 * `typ` at+jwt (an OpenID ID token is not an access token), `iss` a configured
 * issuer, `aud` one of the accepted audiences (the face's resource URL, RFC
 * 8707), `exp` / `nbf` within the clock skew bound, the signature from the
 * issuer's JWKS with an asymmetric algorithm (never `none`, never HMAC with a
 * public key).
 */
import { decodeJwt, decodeProtectedHeader, errors, jwtVerify, type JWTPayload } from "jose";
import type { Clock } from "../clock.js";
import { IssuerUnavailable, type IssuerKeys } from "./issuer-keys.js";
import { makePrincipal, subjectOf, type Principal } from "./principal.js";

const ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"];

export interface JwtCheck {
  issuers: readonly string[];
  audiences: readonly string[];
  clockSkewMs: number;
  /** "at+jwt": the `typ` header must say so (RFC 9068 §2.1); "any": any `typ`, but not a token that looks like an ID token. */
  type: "at+jwt" | "any";
}

/** Claims only OpenID ID tokens carry (OpenID Connect Core §2, §3.3.2.11): such a token is never taken as an access token. */
const ID_TOKEN_CLAIMS = ["nonce", "at_hash", "c_hash"];

/** Why a token was refused: `invalid` (401 invalid_token) or `unavailable` (503: the issuer's keys cannot be had now). */
export type TokenRejection = { kind: "invalid" | "unavailable"; reason: string };

/** Whether `token` has the shape of a JWS compact serialization (three base64url parts). */
export function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*$/.test(token);
}

export async function verifyJwt(token: string, check: JwtCheck, keys: IssuerKeys, clock: Clock): Promise<Principal | TokenRejection> {
  let iss: unknown;
  try {
    const { alg, typ } = decodeProtectedHeader(token);
    if (alg === undefined || !ALGORITHMS.includes(alg))
      return invalid(`its algorithm ${JSON.stringify(alg ?? null)} is not accepted (one of ${ALGORITHMS.join(", ")})`);
    // Checked before any key is fetched: an ID token sent as an access token is refused however well signed.
    if (check.type === "at+jwt" && !isAccessTokenType(typ))
      return invalid(
        `its type (typ header) is ${JSON.stringify(typ ?? null)}, not "at+jwt" (RFC 9068): an ID token or other JWT is not an access token; if your authorization server does not set typ, set gateway.auth.oauth.jwtType: "any"`,
      );
    const claims = decodeJwt(token);
    iss = claims.iss;
    const idClaim = ID_TOKEN_CLAIMS.find((c) => c in claims);
    if (idClaim !== undefined) return invalid(`it carries ${idClaim}, as an OpenID ID token does: send the access token, not the ID token`);
  } catch {
    return invalid("it is not a well-formed JWT");
  }
  if (typeof iss !== "string" || !check.issuers.includes(iss))
    return invalid(`its issuer ${JSON.stringify(iss ?? null)} is not one of gateway.auth.oauth.issuers`);
  const set = await keys.keysOf(iss);
  if (set instanceof IssuerUnavailable) return { kind: "unavailable", reason: set.reason };
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, set, {
      issuer: iss,
      audience: [...check.audiences],
      algorithms: ALGORITHMS,
      clockTolerance: Math.round(check.clockSkewMs / 1000),
      currentDate: new Date(clock.now()),
      requiredClaims: ["exp", "sub"],
    }));
  } catch (err) {
    return rejection(err, check);
  }
  const subject = subjectOf(payload);
  if ("refused" in subject) return invalid(subject.refused);
  return makePrincipal({
    issuer: iss,
    subject: subject.subject,
    scopes: scopesOf(payload),
    claims: payload,
    clientId: typeof payload.client_id === "string" ? payload.client_id : typeof payload.azp === "string" ? payload.azp : undefined,
    expiresAt: payload.exp! * 1000,
  });
}

/** `scope` (RFC 9068 §2.2.3, space-separated) or `scp` (an array, as some servers write it). */
export function scopesOf(claims: Record<string, unknown>): string[] {
  if (typeof claims.scope === "string") return claims.scope.split(" ").filter(Boolean);
  if (Array.isArray(claims.scp)) return claims.scp.filter((s): s is string => typeof s === "string");
  if (typeof claims.scp === "string") return claims.scp.split(" ").filter(Boolean);
  return [];
}

function rejection(err: unknown, check: JwtCheck): TokenRejection {
  if (err instanceof errors.JWTExpired) return invalid("it has expired");
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === "aud") return invalid(`its audience is not this resource (${check.audiences.join(" or ")})`);
    if (err.claim === "nbf") return invalid("it is not valid yet (nbf)");
    return invalid(`its ${err.claim} claim is not accepted (${err.reason})`);
  }
  if (err instanceof errors.JWKSNoMatchingKey) return invalid("no key of its issuer matches it (unknown kid)");
  if (err instanceof errors.JWSSignatureVerificationFailed) return invalid("its signature does not verify");
  if (err instanceof errors.JWKSTimeout || err instanceof errors.JWKSInvalid)
    return { kind: "unavailable", reason: `the issuer's key set could not be read (${errMessage(err)})` };
  if (err instanceof errors.JOSEError) return invalid(errMessage(err));
  return { kind: "unavailable", reason: `the issuer's key set could not be read (${errMessage(err)})` };
}

/** `at+jwt` or `application/at+jwt`, in any case (RFC 9068 §2.1, RFC 7515 §4.1.9). */
function isAccessTokenType(typ: string | undefined): boolean {
  return typ !== undefined && /^(application\/)?at\+jwt$/i.test(typ);
}

function invalid(reason: string): TokenRejection {
  return { kind: "invalid", reason: `the access token was refused: ${reason}` };
}

function errMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
