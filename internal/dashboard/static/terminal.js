// Runtime dashboard: the sandbox page's terminal (xterm.js 6 and its fit
// addon, vendored under /ui/static/vendor; see SOURCES.md there).
//
// Opening a terminal: POST /ui/sandboxes/{id}/terminal with the page's CSRF
// token and the terminal's size (or the pid of a process already on a
// terminal) answers {pid, url}; url is the WebSocket's path with a ticket
// that opens it once. On the WebSocket, binary messages are the terminal's
// bytes both ways (keys typed here go out as UTF-8, output is written to
// xterm.js as bytes, so a character split across messages is joined by
// xterm.js); text messages are JSON: {"type":"resize","cols":C,"rows":R}
// from here whenever the fit addon changes the size, and from the server
// {"type":"exit"|"dropped"|"error", ...}.
//
// The dashboard's CSP allows no inline style. xterm.js's DOM renderer writes
// its stylesheets as <style> elements and 24-bit colours as style
// attributes, so before it runs this script (1) stamps every <style> element
// created on this page with the page's style nonce (the CSP of this page
// lists it; it comes from this script's own nonce attribute, which the
// browser hides from CSS and from getAttribute), and (2) applies
// setAttribute("style", v) through the CSSOM (el.style.cssText = v), which
// CSP does not restrict and which sets the same attribute, for xterm.js's
// elements only (those inside the terminal, or not yet in the page, as its
// rows are when it colours them); any other style attribute stays under the
// CSP. No other script runs on the page (script-src 'self').
"use strict";
(function () {
  var me = document.currentScript;
  var nonce = me && me.nonce ? me.nonce : "";
  if (nonce) {
    var createElement = Document.prototype.createElement;
    Document.prototype.createElement = function (name, options) {
      var el = createElement.call(this, name, options);
      if (String(name).toLowerCase() === "style") el.setAttribute("nonce", nonce);
      return el;
    };
  }
  var setAttribute = Element.prototype.setAttribute;
  Element.prototype.setAttribute = function (name, value) {
    if (String(name).toLowerCase() === "style" && this.style && (!this.isConnected || this.closest(".xterm"))) {
      this.style.cssText = String(value);
      return;
    }
    return setAttribute.call(this, name, value);
  };

  function start() {
    var bar = document.getElementById("term-bar");
    if (!bar || typeof Terminal !== "function" || typeof FitAddon !== "object") return;
    var box = document.getElementById("terminal");
    var status = document.getElementById("term-status");
    var openBtn = document.getElementById("term-open");
    var againBtn = document.getElementById("term-reconnect");
    var sandbox = bar.dataset.sandbox, csrf = bar.dataset.csrf;
    var enc = new TextEncoder();
    var term = null, fit = null, ws = null, pid = 0, ended = false;

    function say(msg, bad) {
      status.textContent = msg;
      status.classList.toggle("bad", !!bad);
    }

    function send(data) {
      if (ws && ws.readyState === WebSocket.OPEN) ws.send(data);
    }

    function sendSize() {
      if (term) send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
    }

    function refit() {
      try { fit.fit(); } catch (e) { /* hidden or not laid out yet */ }
    }

    function makeTerminal() {
      if (term) return;
      box.hidden = false;
      term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000,
        fontFamily: 'ui-monospace, SFMono-Regular, Menlo, "DejaVu Sans Mono", monospace' });
      fit = new FitAddon.FitAddon();
      term.loadAddon(fit);
      term.open(box);
      refit();
      term.onData(function (s) { send(enc.encode(s)); });
      term.onBinary(function (s) { // mouse reports: one byte per character
        var b = new Uint8Array(s.length);
        for (var i = 0; i < s.length; i++) b[i] = s.charCodeAt(i) & 255;
        send(b);
      });
      term.onResize(sendSize);
      if (typeof ResizeObserver === "function") new ResizeObserver(refit).observe(box);
      else window.addEventListener("resize", refit);
    }

    function exited(ev) {
      ended = true;
      var how = "exited with code " + ev.exitCode;
      if (ev.signal) how += " (" + ev.signal + ")";
      if (ev.timedOut) how += ", its timeout ended it";
      if (ev.oomKilled) how += ", killed for the sandbox's memory limit";
      term.write("\r\n\x1b[2m[process " + pid + " " + how + "]\x1b[0m\r\n\x1b[?25l"); // and no cursor
      term.options.disableStdin = true;
      say("Process " + pid + " " + how + ".");
      openBtn.textContent = "Open a new terminal";
      againBtn.hidden = true;
    }

    function disconnect() {
      if (!ws) return;
      ws.onclose = ws.onmessage = ws.onerror = null;
      ws.close(1000);
      ws = null;
    }

    function connect(attachPid) {
      makeTerminal();
      disconnect();
      againBtn.hidden = true;
      var form = new URLSearchParams();
      form.set("csrf", csrf);
      if (attachPid) form.set("pid", String(attachPid));
      else { form.set("cols", String(term.cols)); form.set("rows", String(term.rows)); }
      say(attachPid ? "Connecting to process " + attachPid + "…" : "Starting a shell…");
      fetch("/ui/sandboxes/" + encodeURIComponent(sandbox) + "/terminal",
        { method: "POST", body: form, credentials: "same-origin", cache: "no-store" })
        .then(function (resp) {
          return resp.json().catch(function () { return {}; }).then(function (ans) {
            if (!resp.ok || !ans.url) {
              throw new Error(ans.error || "The server refused (" + resp.status + "); reload the page and try again.");
            }
            return ans;
          });
        })
        .then(function (ans) { open(ans.pid, ans.url); })
        .catch(function (e) { say(e.message, true); });
    }

    function open(p, path) {
      pid = p;
      ended = false;
      term.reset(); // the replay redraws what the program showed
      term.options.disableStdin = false;
      var sock = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + path);
      sock.binaryType = "arraybuffer";
      ws = sock;
      sock.onopen = function () {
        say("Connected to process " + pid + ".");
        box.dataset.pid = String(pid);
        sendSize();
        term.focus();
      };
      sock.onmessage = function (ev) {
        if (typeof ev.data !== "string") {
          term.write(new Uint8Array(ev.data));
          return;
        }
        var m;
        try { m = JSON.parse(ev.data); } catch (e) { return; }
        if (m.type === "exit") exited(m);
        else if (m.type === "dropped") say("This page fell behind: " + m.dropped + " bytes of output were skipped.");
        else if (m.type === "error") say(m.message, true);
      };
      sock.onclose = function (ev) {
        if (ws !== sock) return;
        ws = null;
        if (ended) return;
        say("Disconnected" + (ev.reason ? ": " + ev.reason : " (code " + ev.code + ")") +
          ". The program goes on running in the sandbox.", true);
        againBtn.hidden = false;
      };
    }

    openBtn.addEventListener("click", function () { connect(0); });
    againBtn.addEventListener("click", function () { if (pid) connect(pid); });
    document.querySelectorAll(".term-attach").forEach(function (b) {
      b.addEventListener("click", function () { connect(parseInt(b.dataset.pid, 10)); });
    });
    window.addEventListener("pagehide", disconnect);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
