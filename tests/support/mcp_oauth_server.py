#!/usr/bin/env python3
"""An OAuth 2.1 authorization server and a protected MCP server for the
tests of Mibyan's MCP authorization (tests/mcp_oauth_test.cpp); stdlib only.

Binds 127.0.0.1 on an ephemeral port and prints the port as the first line
of stdout. Both roles share the port:

  POST /mcp                       the MCP server (Streamable HTTP, JSON
                                  answers). Without a valid bearer token:
                                  401 with `WWW-Authenticate: Bearer
                                  resource_metadata=..., scope="mcp:read"`.
                                  Tools: add (a+b), echo_token (returns the
                                  bearer token it got), admin_op (needs the
                                  scope mcp:admin, else 403
                                  insufficient_scope).
  GET /.well-known/oauth-protected-resource/mcp   RFC 9728 metadata
  GET /.well-known/oauth-authorization-server/as  RFC 8414 metadata
                                                  (issuer <origin>/as)
  GET /.well-known/openid-configuration/as        OpenID discovery (only
                                                  with "oidc_only")
  POST /as/register               RFC 7591 (when "dcr")
  GET  /as/authorize              checks client, redirect_uri, PKCE S256,
                                  resource; redirects to the redirect URI
                                  with code, state and iss (the test plays
                                  the browser)
  POST /as/token                  authorization_code (verifies the PKCE
                                  verifier, redirect_uri, resource and the
                                  client secret of a confidential client)
                                  and refresh_token (rotates)

Control routes:
  POST /__config   JSON merged into the settings below
  GET  /__state    JSON counters and the last requests' parameters

Settings: dcr (true), prm_in_header (true), access_ttl (3600 s),
refresh_fails (false), secret_post_only (false: client_secret_basic),
garbage_prm (false), hang_as_metadata (false),
no_s256 (false), oidc_only (false), tamper_state (false),
clients ({client_id: {"secret": s, "redirect_uris": [..]}} pre-registered),
revoked (list of access tokens the MCP server refuses from now on).
"""

import base64
import hashlib
import json
import secrets
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
SETTINGS = {
    "dcr": True,
    "prm_in_header": True,
    "access_ttl": 3600,
    "refresh_fails": False,
    "garbage_prm": False,
    "hang_as_metadata": False,
    "no_s256": False,
    "oidc_only": False,
    "tamper_state": False,
    "clients": {},
}
STATE = {
    "registrations": 0,
    "authorize": [],
    "token_requests": [],
    "mcp_requests": 0,
    "mcp_unauthorized": 0,
    "mcp_forbidden": 0,
    "bearers_seen": [],
}
CODES = {}      # code -> dict
ACCESS = {}     # token -> {"expires": t, "scope": s, "resource": r}
REFRESH = {}    # token -> {"client_id", "scope", "resource"}
REVOKED = set()
PORT = 0


def origin():
    return "http://127.0.0.1:%d" % PORT


def issuer():
    return origin() + "/as"


def resource():
    return origin() + "/mcp"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    # -- helpers ----------------------------------------------------------
    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send(self, status, obj=None, headers=None, raw=None, ctype="application/json"):
        data = raw if raw is not None else (b"" if obj is None else json.dumps(obj).encode())
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if data:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def challenge(self, error=None, scope="mcp:read", desc=None):
        parts = []
        if SETTINGS["prm_in_header"]:
            parts.append('resource_metadata="%s/.well-known/oauth-protected-resource/mcp"' % origin())
        if scope:
            parts.append('scope="%s"' % scope)
        if error:
            parts.append('error="%s"' % error)
        if desc:
            parts.append('error_description="%s"' % desc)
        return "Bearer " + ", ".join(parts)

    def as_metadata(self):
        md = {
            "issuer": issuer(),
            "authorization_endpoint": issuer() + "/authorize",
            "token_endpoint": issuer() + "/token",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported":
                ["none", "client_secret_post"] if SETTINGS.get("secret_post_only")
                else ["none", "client_secret_basic"],
        }
        if not SETTINGS["no_s256"]:
            md["code_challenge_methods_supported"] = ["S256"]
        if SETTINGS["dcr"]:
            md["registration_endpoint"] = issuer() + "/register"
        return md

    # -- routes -----------------------------------------------------------
    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(url.query))
        p = url.path
        if p == "/__state":
            with LOCK:
                return self.send(200, STATE)
        if p == "/.well-known/oauth-protected-resource/mcp":
            if SETTINGS["garbage_prm"]:
                return self.send(200, raw=b"{not json", ctype="application/json")
            return self.send(200, {
                "resource": resource(),
                "authorization_servers": [issuer()],
                "scopes_supported": ["mcp:read", "mcp:admin"],
                "bearer_methods_supported": ["header"],
            })
        if p == "/.well-known/oauth-protected-resource":
            if SETTINGS["garbage_prm"]:
                return self.send(200, raw=b"\x00\x01garbage", ctype="text/plain")
            return self.send(404, {"error": "not here"})
        if p == "/.well-known/oauth-authorization-server/as":
            if SETTINGS["hang_as_metadata"]:
                time.sleep(3600)
            if SETTINGS["oidc_only"]:
                return self.send(404, {"error": "not here"})
            return self.send(200, self.as_metadata())
        if p == "/.well-known/openid-configuration/as":
            if SETTINGS["oidc_only"]:
                return self.send(200, self.as_metadata())
            return self.send(404, {"error": "not here"})
        if p == "/as/authorize":
            return self.authorize(q)
        if p == "/mcp":
            return self.send(405, {"error": "no GET stream"})
        return self.send(404, {"error": "no route " + p})

    def authorize(self, q):
        with LOCK:
            STATE["authorize"].append(q)
            clients = SETTINGS["clients"]
            client = clients.get(q.get("client_id", ""))
        if client is None:
            return self.send(400, {"error": "invalid_client"})
        if q.get("redirect_uri") not in client["redirect_uris"]:
            return self.send(400, {"error": "invalid_request", "error_description": "redirect_uri not registered"})
        if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return self.send(400, {"error": "invalid_request", "error_description": "PKCE S256 required"})
        if q.get("resource") != resource():
            return self.send(400, {"error": "invalid_target"})
        code = secrets.token_urlsafe(16)
        with LOCK:
            CODES[code] = {
                "client_id": q["client_id"],
                "redirect_uri": q["redirect_uri"],
                "challenge": q["code_challenge"],
                "resource": q["resource"],
                "scope": q.get("scope", ""),
            }
        state = q.get("state", "")
        if SETTINGS["tamper_state"]:
            state = "forged-" + state[::-1]
        loc = q["redirect_uri"] + "?" + urllib.parse.urlencode(
            {"code": code, "state": state, "iss": issuer()})
        self.send(302, headers={"Location": loc})

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        p = url.path
        raw = self.body()
        if p == "/__config":
            with LOCK:
                cfg = json.loads(raw or b"{}")
                if "revoked" in cfg:
                    REVOKED.update(cfg.pop("revoked"))
                SETTINGS.update(cfg)
            return self.send(200, {"ok": True})
        if p == "/as/register":
            if not SETTINGS["dcr"]:
                return self.send(404, {"error": "no registration"})
            try:
                req = json.loads(raw)
                uris = req["redirect_uris"]
                assert isinstance(uris, list) and uris
            except Exception:
                return self.send(400, {"error": "invalid_client_metadata"})
            cid = "dyn-" + secrets.token_hex(6)
            with LOCK:
                STATE["registrations"] += 1
                SETTINGS["clients"][cid] = {"secret": "", "redirect_uris": uris}
            return self.send(201, {"client_id": cid, "redirect_uris": uris,
                                   "token_endpoint_auth_method": "none"})
        if p == "/as/token":
            return self.token(dict(urllib.parse.parse_qsl(raw.decode())))
        if p == "/mcp":
            return self.mcp(raw)
        return self.send(404, {"error": "no route " + p})

    def do_DELETE(self):
        self.body()
        self.send(200, {})

    def client_ok(self, f):
        cid = f.get("client_id", "")
        client = SETTINGS["clients"].get(cid)
        if client is None:
            return None
        if client.get("secret") and SETTINGS.get("secret_post_only"):
            if f.get("client_secret") != client["secret"]:
                return None
        elif client.get("secret"):
            auth = self.headers.get("Authorization", "")
            want = "Basic " + base64.b64encode(
                (urllib.parse.quote(cid, safe="") + ":" + urllib.parse.quote(client["secret"], safe="")).encode()).decode()
            if auth != want:
                return None
        return cid

    def issue(self, cid, scope, res):
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(24)
        ttl = SETTINGS["access_ttl"]
        ACCESS[access] = {"expires": time.time() + ttl, "scope": scope, "resource": res}
        REFRESH[refresh] = {"client_id": cid, "scope": scope, "resource": res}
        out = {"access_token": access, "token_type": "Bearer", "expires_in": ttl,
               "refresh_token": refresh}
        if scope:
            out["scope"] = scope
        return out

    def token(self, f):
        with LOCK:
            STATE["token_requests"].append({k: v for k, v in f.items()
                                            if k not in ("code", "refresh_token", "code_verifier",
                                                         "client_secret")}
                                           | {"had_verifier": bool(f.get("code_verifier")),
                                              "basic_auth": self.headers.get("Authorization", "").startswith("Basic ")})
            cid = self.client_ok(f)
            if cid is None:
                return self.send(401, {"error": "invalid_client"})
            grant = f.get("grant_type")
            if grant == "authorization_code":
                c = CODES.pop(f.get("code", ""), None)
                if c is None or c["client_id"] != cid or c["redirect_uri"] != f.get("redirect_uri"):
                    return self.send(400, {"error": "invalid_grant"})
                verifier = f.get("code_verifier", "")
                if b64url(hashlib.sha256(verifier.encode()).digest()) != c["challenge"]:
                    return self.send(400, {"error": "invalid_grant", "error_description": "PKCE verification failed"})
                if f.get("resource") != c["resource"]:
                    return self.send(400, {"error": "invalid_target"})
                return self.send(200, self.issue(cid, c["scope"], c["resource"]))
            if grant == "refresh_token":
                r = REFRESH.pop(f.get("refresh_token", ""), None)
                if SETTINGS["refresh_fails"] or r is None or r["client_id"] != cid:
                    return self.send(400, {"error": "invalid_grant", "error_description": "refresh token expired"})
                if f.get("resource", r["resource"]) != r["resource"]:
                    return self.send(400, {"error": "invalid_target"})
                return self.send(200, self.issue(cid, r["scope"], r["resource"]))
            return self.send(400, {"error": "unsupported_grant_type"})

    def mcp(self, raw):
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else ""
        with LOCK:
            STATE["mcp_requests"] += 1
            if token:
                STATE["bearers_seen"].append(token[-6:])
            info = ACCESS.get(token)
            valid = (info is not None and token not in REVOKED
                     and info["expires"] > time.time() and info["resource"] == resource())
            if not valid:
                STATE["mcp_unauthorized"] += 1
        if not valid:
            return self.send(401, {"error": "unauthorized"},
                             headers={"WWW-Authenticate": self.challenge("invalid_token" if token else None)})
        try:
            msg = json.loads(raw)
        except Exception:
            return self.send(400, {"error": "bad json"})
        if "id" not in msg:
            return self.send(202)
        method = msg.get("method")
        mid = msg["id"]
        if method == "initialize":
            result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                      "capabilities": {"tools": {}},
                      "serverInfo": {"name": "oauth-test", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [
                {"name": "add", "inputSchema": {"type": "object", "properties": {
                    "a": {"type": "number"}, "b": {"type": "number"}}}},
                {"name": "echo_token", "inputSchema": {"type": "object"}},
                {"name": "admin_op", "inputSchema": {"type": "object"}}]}
        elif method == "ping":
            result = {}
        elif method == "tools/call":
            name = msg["params"]["name"]
            args = msg["params"].get("arguments") or {}
            if name == "admin_op" and "mcp:admin" not in info["scope"].split():
                with LOCK:
                    STATE["mcp_forbidden"] += 1
                return self.send(403, {"error": "insufficient_scope"}, headers={
                    "WWW-Authenticate": self.challenge("insufficient_scope", "mcp:read mcp:admin",
                                                       "admin_op needs mcp:admin")})
            if name == "add":
                text = str(args.get("a", 0) + args.get("b", 0))
            elif name == "echo_token":
                text = "your token is " + token
            else:
                text = "admin done"
            result = {"content": [{"type": "text", "text": text}]}
        else:
            return self.send(200, {"jsonrpc": "2.0", "id": mid,
                                   "error": {"code": -32601, "message": "no method"}})
        self.send(200, {"jsonrpc": "2.0", "id": mid, "result": result})


def main():
    global PORT
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    PORT = server.server_address[1]
    print(PORT, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
