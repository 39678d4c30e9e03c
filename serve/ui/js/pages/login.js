// The login page: asks once for the node's key (MIBYAN_SERVER_KEY) and
// posts it to /ui/api/login; the server answers with the CSRF token and
// sets the HttpOnly session cookie. The key is never stored by the page.

import { h } from "../dom.js";
import * as api from "../api.js";

export function renderLogin(root, message, onLoggedIn) {
  const status = h("p.notice", { role: "status", "aria-live": "polite" });
  status.hidden = true;
  const input = h("input#login-key", {
    type: "password", name: "key", autocomplete: "current-password", required: true,
    spellcheck: "false", "aria-describedby": "login-help",
  });
  const submit = h("button.btn.primary", { type: "submit" }, "Log in");
  const form = h("form.login-form", { "data-testid": "login-form" },
    h("label", { for: "login-key" }, "Server key"),
    input,
    h("p#login-help.help", "The key this node was started with (MIBYAN_SERVER_KEY). "
      + "The console keeps a signed session cookie, not the key."),
    submit,
    status);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    submit.disabled = true;
    status.hidden = true;
    try {
      const res = await api.post("/ui/api/login", { key: input.value }, { noAuthRedirect: true });
      input.value = "";
      onLoggedIn(res && res.csrf ? String(res.csrf) : "");
    } catch (e) {
      status.hidden = false;
      status.className = "notice error";
      status.textContent = e.status === 429
        ? "Too many attempts; wait a moment and try again."
        : e.status === 401 || e.status === 403 ? "That key is not right." : e.message;
      input.select();
    } finally {
      submit.disabled = false;
    }
  });
  root.appendChild(h("section.login.card",
    h("h1", "Mibyan console"),
    message ? h("p.notice.info", message) : null,
    form));
  input.focus();
}
