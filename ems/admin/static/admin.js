// The admin console's only script (the Content-Security-Policy allows no other, and no
// inline script). It asks before a form marked data-confirm is sent, gives fetch calls
// to the API the page's CSRF token, and adds what needs a script:
// - the theme (system, light or dark; kept in localStorage), applied as <html data-theme>
//   before the page is drawn (this file is loaded without defer for that);
// - live refresh (off unless turned on; kept per tab in sessionStorage): <main> is fetched
//   again every 10 s, but not while the tab is hidden, a field has focus or a form on the
//   page was edited;
// - keyboard shortcuts: "/" focuses the page's search field, "?" opens the shortcuts help
//   (Escape closes it); none while typing in a field or with Ctrl, Alt or Meta held;
// - relative times: a <time datetime> says how long ago on hover (its title).
"use strict";

(function () {
  var THEME_KEY = "ems.theme";
  var LIVE_KEY = "ems.live";
  var LIVE_MS = 10000;
  var root = document.documentElement;

  function stored(storage, key) {
    try {
      return window[storage].getItem(key);
    } catch (e) {
      return null; // storage refused (privacy settings): nothing is remembered
    }
  }

  function store(storage, key, value) {
    try {
      window[storage].setItem(key, value);
    } catch (e) {
      // remembered for this page only
    }
  }

  // -- theme ---------------------------------------------------------------------------

  // "light" and "dark" set data-theme; "system" removes it and the stylesheet follows
  // prefers-color-scheme.
  function applyTheme(choice) {
    if (choice === "light" || choice === "dark") {
      root.setAttribute("data-theme", choice);
    } else {
      root.removeAttribute("data-theme");
    }
  }

  function themeChoice() {
    var choice = stored("localStorage", THEME_KEY);
    return choice === "light" || choice === "dark" ? choice : "system";
  }

  applyTheme(themeChoice());

  // -- relative times ------------------------------------------------------------------

  // How long ago `then` was at `now` (both in milliseconds), in words: "just now",
  // "42 s ago", "3 min ago", "5 h ago", "2 d ago"; a future time: "in 3 min".
  function relativeTime(then, now) {
    var seconds = Math.round((now - then) / 1000);
    var future = seconds < 0;
    var left = Math.abs(seconds);
    var text;
    if (left < 5) {
      return "just now";
    } else if (left < 60) {
      text = left + " s";
    } else if (left < 3600) {
      text = Math.floor(left / 60) + " min";
    } else if (left < 86400) {
      text = Math.floor(left / 3600) + " h";
    } else {
      text = Math.floor(left / 86400) + " d";
    }
    return future ? "in " + text : text + " ago";
  }
  window.emsRelativeTime = relativeTime;

  function titleTime(event) {
    var target = event.target;
    var time = target && target.closest ? target.closest("time[datetime]") : null;
    if (!time) {
      return;
    }
    var then = Date.parse(time.getAttribute("datetime"));
    if (!isNaN(then)) {
      time.setAttribute("title", relativeTime(then, Date.now()));
    }
  }

  // -- live refresh --------------------------------------------------------------------

  var live = { on: false, timer: null, edited: false, busy: false };

  function interval() {
    // Tests shorten it through this attribute; the server never sets it.
    var ms = parseInt(root.getAttribute("data-live-interval-ms") || "", 10);
    return ms > 0 ? ms : LIVE_MS;
  }

  function typing(element) {
    if (!element || element === document.body) {
      return false;
    }
    var tag = element.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || element.isContentEditable;
  }

  function mayRefresh() {
    var main = document.querySelector("main");
    if (document.visibilityState !== "visible" || live.edited ||
        (main && main.hasAttribute("data-static"))) {
      return false;
    }
    var focused = document.activeElement;
    return !(typing(focused) && focused.closest("main, form"));
  }

  function refresh() {
    if (live.busy || !mayRefresh()) {
      return;
    }
    live.busy = true;
    fetch(window.location.href, {
      credentials: "same-origin",
      headers: { "Accept": "text/html" },
      redirect: "manual"
    }).then(function (response) {
      // A redirect (signed out) or an error: keep the page as it is.
      if (response.status !== 200) {
        throw new Error("status " + response.status);
      }
      return response.text();
    }).then(function (html) {
      var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("main");
      var current = document.querySelector("main");
      // A field may have been focused or edited while the page was on its way.
      if (fresh && current && mayRefresh()) {
        current.replaceWith(document.adoptNode(fresh));
        showLive("on");
      }
    }).catch(function () {
      showLive("error");
    }).then(function () {
      live.busy = false;
    });
  }

  function showLive(state) {
    var button = document.getElementById("live-toggle");
    if (!button) {
      return;
    }
    button.setAttribute("aria-pressed", live.on ? "true" : "false");
    var words = { off: "Live: off", on: "Live: on", error: "Live: on (last refresh failed)",
                  edited: "Live: paused (form edited)" };
    button.textContent = words[live.on ? (live.edited ? "edited" : state) : "off"];
  }

  function setLive(on) {
    live.on = on;
    store("sessionStorage", LIVE_KEY, on ? "on" : "off");
    if (live.timer !== null) {
      window.clearInterval(live.timer);
      live.timer = null;
    }
    if (on) {
      live.timer = window.setInterval(refresh, interval());
    }
    showLive(on ? "on" : "off");
  }

  // -- keyboard shortcuts --------------------------------------------------------------

  function openHelp() {
    var help = document.getElementById("shortcuts");
    if (help && !help.open) {
      help.showModal();
    }
  }

  function onKey(event) {
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) {
      return;
    }
    if (typing(event.target)) {
      return;
    }
    var help = document.getElementById("shortcuts");
    if (help && help.open) {
      return; // the dialog handles Escape itself
    }
    if (event.key === "/") {
      var search = document.querySelector('main input[type="search"], main [role="search"] input');
      if (search) {
        event.preventDefault();
        search.focus();
        search.select();
      }
    } else if (event.key === "?") {
      event.preventDefault();
      openHelp();
    }
  }

  // -- wiring --------------------------------------------------------------------------

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  // For later pages: a JSON call to /api/v1/ with the session's CSRF token.
  window.emsApi = function (method, path, body) {
    var options = {
      method: method,
      credentials: "same-origin",
      headers: { "Accept": "application/json", "X-CSRFToken": csrfToken() }
    };
    if (body !== undefined) {
      options.headers["Content-Type"] = "application/json";
      options.body = JSON.stringify(body);
    }
    return fetch(path, options);
  };

  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    var theme = document.getElementById("theme-choice");
    if (theme) {
      theme.value = themeChoice();
      theme.addEventListener("change", function () {
        store("localStorage", THEME_KEY, theme.value);
        applyTheme(theme.value);
      });
    }

    var toggle = document.getElementById("live-toggle");
    if (toggle) {
      toggle.addEventListener("click", function () {
        setLive(!live.on);
      });
      setLive(stored("sessionStorage", LIVE_KEY) === "on");
    }
    // An edit to any form of the page (not the header's own controls) stops the refresh
    // until the page is left: swapping <main> would lose it.
    document.addEventListener("input", function (event) {
      var field = event.target;
      if (field && field.closest && field.closest("main")) {
        live.edited = true;
        showLive("on");
      }
    });

    var help = document.getElementById("shortcuts");
    var open = document.getElementById("shortcuts-open");
    var close = document.getElementById("shortcuts-close");
    if (open) {
      open.addEventListener("click", openHelp);
    }
    if (close && help) {
      close.addEventListener("click", function () {
        help.close();
      });
    }
    document.addEventListener("keydown", onKey);
    document.addEventListener("mouseover", titleTime);
    document.addEventListener("focusin", titleTime);
  });
})();
