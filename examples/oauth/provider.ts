/**
 * A local OpenID provider to try the gateway's OAuth on one machine: the
 * `oidc-provider` the tests use (test/helpers/oidc.ts) on 127.0.0.1:9400,
 * issuing RFC 9068 JWT access tokens for the resource a client names
 * (RFC 8707), with dynamic client registration for MCP clients and the
 * console's client registered. Its login page takes any name and password;
 * the name "admin" gets the console's admin role. Development only.
 * Run: `npm run example:oauth-provider`; see examples/oauth/README.md.
 */
import { startOidcProvider } from "../../test/helpers/oidc.js";

const port = Number(process.env.OIDC_PORT ?? 9400);
const gateway = process.env.EMCEEPEE_URL ?? "http://127.0.0.1:8808";

const provider = await startOidcProvider({
  port,
  scopes: ["mcp:tools"],
  accessTokenTTL: 3600,
  clients: [
    {
      client_id: "emceepee-console",
      client_secret: "console-secret-for-local-use-only",
      redirect_uris: [`${gateway}/console/callback`],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "client_secret_post",
    },
  ],
  accountClaims: (id) => ({ roles: id === "admin" ? ["mcp-admins"] : [] }),
});
process.stdout.write(`OpenID provider at ${provider.issuer} (Ctrl-C stops it)\n`);
const stop = () => void provider.close().then(() => process.exit(0));
process.once("SIGINT", stop);
process.once("SIGTERM", stop);
