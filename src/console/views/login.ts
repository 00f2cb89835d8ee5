/** The login page: the gateway's token, once, into an HttpOnly cookie (guards.ts checks it). */
import { html, type Html } from "../html.js";

export function loginBody(next: string, tokenRequired: boolean, error?: string): Html {
  if (!tokenRequired) return html`<p>This gateway has no token: the console is open. <a href="/console">Go to the console</a>.</p>`;
  return html`${error ? html`<p class="error" role="alert">${error}</p>` : ""}
    <form method="post" action="/console/login" class="login">
      <input type="hidden" name="next" value="${next}" />
      <div class="field">
        <label for="token">Gateway token</label><input id="token" name="token" type="password" autocomplete="current-password" required autofocus />
      </div>
      <div class="actions"><button type="submit">Log in</button></div>
      <p class="hint">The token of <code>--token</code> / <code>EMCEEPEE_TOKEN</code>. It is kept as an HttpOnly cookie for this console only.</p>
    </form>`;
}
