// The rating page: keyboard shortcuts, visible time on task, focus after each htmx swap.
// Everything here is an enhancement: without JavaScript the forms post and redirect as usual.
(() => {
  "use strict";

  const page = document.querySelector("[data-rate-page]");
  if (!page) return;
  // The page's language (Django's JavaScript catalogue, /jsi18n/); English if it did not load.
  const gettext = typeof window.gettext === "function" ? window.gettext : (text) => text;
  const interpolate =
    typeof window.interpolate === "function"
      ? window.interpolate
      : (text, values) => text.replace(/%\((\w+)\)s/g, (_, name) => values[name]);
  const CHOOSE_PREFERENCE = () => gettext("Choose a preference first (keys 1–5).");

  // ------------------------------------------------------------ elements of the current item
  const form = () => document.querySelector("[data-rating-form]");
  const inForm = (selector) => (form() ? form().querySelector(selector) : null);
  const skipPanel = () => inForm("[data-skip-panel]");
  const submitButton = () => inForm("[data-submit]");
  const skipButton = () => inForm("[data-skip-confirm]");
  const preferenceRadios = () => Array.from(form() ? form().querySelectorAll('input[name="preference"]') : []);
  const chosenPreference = () => preferenceRadios().find((radio) => radio.checked) || null;
  const chosenReason = () => inForm('input[name="skip_reason"]:checked');
  // "Both unacceptable" is an outcome of its own, given instead of a preference (U, then Enter).
  const unacceptableBox = () => inForm('input[name="both_unacceptable"]');
  const unacceptable = () => Boolean(unacceptableBox() && unacceptableBox().checked);
  const answered = () => Boolean(chosenPreference()) || unacceptable();
  const reasonBoxes = () => Array.from(form() ? form().querySelectorAll('[data-reasons] input[type="checkbox"]') : []);
  // The page's own words for the hints below (translated in the template).
  const message = (name) => {
    const box = inForm("[data-detail-messages]");
    return box ? box.dataset[name] || "" : "";
  };
  const dialog = () => document.getElementById("shortcuts");
  const openDialog = () => document.querySelector("dialog[open]");
  // A content note is shown before an item of a risk level: the item stays hidden (and the
  // keys do nothing to it) until the rater chooses to continue (annotation.care).
  const contentNote = () => document.querySelector("[data-content-note]");

  // The line under the buttons (role="alert": screen readers announce it). "alert" is for what
  // stops the rater (red), "info" for what the keys do next.
  function hint(text, tone = "alert") {
    const box = inForm("[data-hint]");
    if (!box) return;
    box.textContent = text;
    if (text) box.dataset.tone = tone;
    else delete box.dataset.tone;
  }

  // ------------------------------------------------------------ visible time on the item
  // Counted only while the tab is visible; restarts when a different item is shown.
  const clock = { spent: 0, since: null, item: null };

  function clockRunning() {
    return clock.since !== null;
  }
  function pauseClock() {
    if (clockRunning()) clock.spent += performance.now() - clock.since;
    clock.since = null;
  }
  function resumeClock() {
    if (!clockRunning() && !document.hidden && !contentNote()) clock.since = performance.now();
  }
  function visibleMs() {
    return Math.round(clock.spent + (clockRunning() ? performance.now() - clock.since : 0));
  }
  function writeClock() {
    const input = inForm('input[name="client_time_ms"]');
    if (input) input.value = String(visibleMs());
  }
  function syncClockToItem() {
    const current = form() ? form().getAttribute("action") : null;
    if (current !== clock.item) {
      clock.item = current;
      clock.spent = 0;
      clock.since = null;
      resumeClock();
    }
  }
  document.addEventListener("visibilitychange", () => (document.hidden ? pauseClock() : resumeClock()));
  // Submit without a preference (the button is only aria-disabled, so the click arrives) sends
  // nothing and says why, by the buttons, instead of the browser's bubble on the first radio.
  document.addEventListener("click", (event) => {
    if (!event.target.closest("[data-submit]") || answered()) return;
    event.preventDefault();
    hint(CHOOSE_PREFERENCE());
  });
  document.addEventListener("submit", writeClock, true); // before htmx reads the form
  document.addEventListener("htmx:confirm", writeClock);

  // ------------------------------------------------------------ button states
  function refresh() {
    const submit = submitButton();
    if (submit) {
      // aria-disabled, not disabled: a click still arrives and is answered with the alert.
      const waiting = !answered();
      submit.setAttribute("aria-disabled", String(waiting));
      submit.title = waiting ? gettext("Choose a preference first (keys 1–5)") : "";
    }
    // Reasons say why the preferred response is better: only with a preference for one.
    const preferred = chosenPreference() && chosenPreference().value !== "0" && !unacceptable();
    for (const box of reasonBoxes()) box.disabled = !preferred;
    const skip = skipButton();
    if (skip && !skip.hasAttribute("data-disabled-by-htmx")) skip.disabled = !chosenReason();
  }
  document.addEventListener("change", (event) => {
    if (event.target.closest("[data-rating-form]")) {
      if (event.target.name === "preference" && unacceptableBox()) unacceptableBox().checked = false;
      if (event.target.name === "both_unacceptable" && event.target.checked) {
        for (const radio of preferenceRadios()) radio.checked = false;
      }
      refresh();
      if (event.target.name === "preference") hint("");
      if (event.target.name === "both_unacceptable") hint(event.target.checked ? message("unacceptable") : "", "info");
    }
  });

  // ------------------------------------------------------------ nothing hides under the sticky strips
  // The page's scroll padding is the progress strip's height (top) and the choice bar's (bottom):
  // scrolling to the item, to a focused control or to the end of a response keeps it clear of both.
  const GAP_PX = 8;
  function padScrolling() {
    const root = document.documentElement.style;
    const strip = document.getElementById("progress");
    const bar = inForm(".choice-bar");
    root.scrollPaddingTop = strip ? `${strip.offsetHeight + GAP_PX}px` : "";
    root.scrollPaddingBottom = bar ? `${bar.offsetHeight + GAP_PX}px` : "";
  }
  const sizes = new ResizeObserver(padScrolling);
  function watchSizes() {
    sizes.disconnect();
    for (const element of [document.getElementById("progress"), inForm(".choice-bar")]) {
      if (element) sizes.observe(element);
    }
    padScrolling();
  }

  // ------------------------------------------------------------ care for raters
  // The content note: "Continue" shows the item here (its link reloads the page with the item
  // when JavaScript is off); "I'd rather not" posts like any answer.
  function continueToItem() {
    const note = contentNote();
    if (!note) return;
    note.remove();
    const hidden = document.querySelector("[data-behind-note]");
    if (hidden) hidden.hidden = false;
    resumeClock();
    watchSizes();
    const item = document.getElementById("item");
    if (item) {
      item.focus({ preventScroll: true });
      item.scrollIntoView({ block: "start" });
    }
  }
  document.addEventListener("click", (event) => {
    if (event.target.closest("[data-note-continue]")) {
      event.preventDefault();
      continueToItem();
    }
  });

  // Support: the campaign's helplines and contact, in a dialog (its link opens the support
  // page when JavaScript is off).
  function openSupport() {
    const box = document.getElementById("support");
    if (!box || box.open) return;
    if (openDialog()) openDialog().close();
    box.showModal();
  }
  document.addEventListener("click", (event) => {
    if (event.target.closest("[data-support-open]")) {
      event.preventDefault();
      openSupport();
    }
  });

  // A break prompt after the campaign's minutes of continuous rating: the streak starts with
  // the first item shown and ends after a pause of BREAK_GAP_MS without a new item, in this
  // browser (localStorage, so it spans tabs and campaigns). "Continue rating" starts it again.
  const BREAK_KEY = "h2htalk-rating-streak";
  const BREAK_GAP_MS = 5 * 60 * 1000;
  const breakMinutes = Number(page.dataset.breakMinutes || 0);
  function readStreak() {
    try {
      const streak = JSON.parse(window.localStorage.getItem(BREAK_KEY) || "null");
      return streak && Number.isFinite(streak.start) && Number.isFinite(streak.last) ? streak : null;
    } catch {
      return null;
    }
  }
  function writeStreak(streak) {
    try {
      window.localStorage.setItem(BREAK_KEY, JSON.stringify(streak));
    } catch {
      // storage refused (private mode): no prompt, rating goes on
    }
  }
  function checkBreak() {
    const prompt = document.querySelector("[data-break-prompt]");
    if (!breakMinutes || !prompt) return;
    const now = Date.now();
    let streak = readStreak();
    if (!streak || now - streak.last > BREAK_GAP_MS) streak = { start: now, last: now };
    streak.last = now;
    writeStreak(streak);
    if (now - streak.start >= breakMinutes * 60 * 1000 && !openDialog()) prompt.showModal();
  }
  document.addEventListener("click", (event) => {
    if (event.target.closest("[data-break-continue]")) writeStreak({ start: Date.now(), last: Date.now() });
  });

  // ------------------------------------------------------------ a new item arrived
  function setUp({ focus }) {
    syncClockToItem();
    if (contentNote()) pauseClock();
    refresh();
    watchSizes();
    checkBreak();
    const note = contentNote();
    if (note) {
      note.querySelector("[data-note-continue]")?.focus({ preventScroll: true });
      return;
    }
    const item = document.getElementById("item");
    if (!item || !focus) return;
    const panel = skipPanel();
    if (panel && panel.open) {
      focusReasons();
    } else {
      item.focus({ preventScroll: true });
    }
    item.scrollIntoView({ block: "start" }); // below the progress strip (scroll padding)
  }
  document.body.addEventListener("htmx:afterSettle", (event) => {
    if (event.target && event.target.id === "item") setUp({ focus: true });
  });
  // Logged out meanwhile (the request was redirected to the login page): go there for real
  // instead of putting a login form where the item was.
  document.body.addEventListener("htmx:beforeSwap", (event) => {
    // 409 on submit or skip: the campaign is not open; the answer is the panel that says so.
    if (event.detail.xhr && event.detail.xhr.status === 409) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
      return;
    }
    const url = event.detail.xhr && event.detail.xhr.responseURL;
    if (url && new URL(url).pathname.endsWith("/login/")) {
      event.detail.shouldSwap = false;
      window.location.assign(url.split("?")[0] + "?next=" + encodeURIComponent(window.location.pathname));
    }
  });
  // Errors keep the choices on screen, say so, and let Enter try again.
  document.body.addEventListener("htmx:responseError", (event) => {
    const status = event.detail.xhr ? event.detail.xhr.status : 0;
    hint(
      status === 404
        ? gettext("This item is no longer yours. Reload the page for the next one.")
        : interpolate(gettext("The server could not save this (error %(status)s). Your choices are kept: press Enter to try again, or reload."), { status }, true),
    );
    refresh();
  });
  document.body.addEventListener("htmx:sendError", () => {
    hint(gettext("No connection to the server. Your choices are kept: press Enter to try again."));
    refresh();
  });

  // ------------------------------------------------------------ actions
  function choosePreference(n) {
    const radio = preferenceRadios()[n - 1];
    if (!radio) return;
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    radio.focus({ preventScroll: true });
  }
  function chooseInGroup(group, digit) {
    const radios = Array.from(group.querySelectorAll('input[type="radio"]'));
    const radio = radios.find((r) => r.value === String(digit)) || (group.hasAttribute("data-skip-reasons") ? radios[digit - 1] : null);
    if (!radio) return false;
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
    radio.focus({ preventScroll: true });
    return true;
  }
  function focusGroup(selector) {
    const inputs = Array.from(form() ? form().querySelectorAll(`${selector} input`) : []);
    const input = inputs.find((i) => i.checked && !i.disabled) || inputs.find((i) => !i.disabled);
    if (input) input.focus({ preventScroll: false });
    return input;
  }
  function toggleReason(digit) {
    const box = reasonBoxes()[digit - 1];
    if (!box) return;
    if (box.disabled) return hint(message("noReasons"));
    box.checked = !box.checked;
    box.dispatchEvent(new Event("change", { bubbles: true }));
    box.focus({ preventScroll: true });
  }
  function focusReasons() {
    const radio = chosenReason() || inForm('input[name="skip_reason"]');
    if (radio) radio.focus({ preventScroll: true });
  }
  function openSkip() {
    const panel = skipPanel();
    if (!panel) return;
    panel.open = true;
    focusReasons();
    hint(gettext("Skipping: choose a reason (1–5), then Enter. Esc cancels."), "info");
  }
  function closeSkip() {
    const panel = skipPanel();
    if (panel) panel.open = false;
    hint("");
    const item = document.getElementById("item");
    if (item) item.focus({ preventScroll: true });
  }
  function submitNow() {
    const panel = skipPanel();
    if (panel && panel.open) {
      if (!chosenReason()) return hint(gettext("Choose a reason first (1–5)."));
      return skipButton().click();
    }
    if (!answered()) return hint(CHOOSE_PREFERENCE());
    submitButton().click();
  }
  function toggleDetails(details) {
    if (details) details.open = !details.open;
    return details;
  }

  // ------------------------------------------------------------ shortcuts overlay
  function openShortcuts() {
    const box = dialog();
    if (box && !box.open) box.showModal();
  }
  document.addEventListener("click", (event) => {
    if (event.target.closest("[data-shortcuts-open]")) openShortcuts();
  });

  // ------------------------------------------------------------ the keyboard
  function isTyping(element) {
    if (!element) return false;
    if (element.isContentEditable) return true;
    if (element.tagName === "TEXTAREA" || element.tagName === "SELECT") return true;
    return element.tagName === "INPUT" && !["radio", "checkbox", "button", "submit"].includes(element.type);
  }

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    const target = event.target;
    const key = event.key;

    if (openDialog()) return; // a dialog handles Esc itself

    if (isTyping(target)) {
      if (key === "Escape") {
        event.preventDefault();
        if (skipPanel() && skipPanel().contains(target)) closeSkip();
        else document.getElementById("item")?.focus({ preventScroll: true });
      }
      return; // typing: no shortcuts
    }

    if (key === "?") {
      event.preventDefault();
      openShortcuts();
      return;
    }
    if (key === "h" || key === "H") {
      event.preventDefault();
      openSupport();
      return;
    }
    if (!form() || contentNote()) return; // all done, paused or behind a content note

    if (/^[1-9]$/.test(key) && target.closest && target.closest("[data-reasons]")) {
      event.preventDefault();
      toggleReason(Number(key));
      return;
    }
    if (/^[1-5]$/.test(key)) {
      event.preventDefault();
      const digit = Number(key);
      const panel = skipPanel();
      if (panel && panel.open) {
        chooseInGroup(panel.querySelector("[data-skip-reasons]"), digit);
        return;
      }
      const group = target.closest && target.closest("[data-digit-group]");
      if (group && chooseInGroup(group, digit)) return;
      choosePreference(digit);
      return;
    }

    switch (key) {
      case "Enter": {
        const tag = target.tagName;
        if (tag === "BUTTON" || tag === "A" || tag === "SUMMARY") return; // their own action
        event.preventDefault();
        submitNow();
        return;
      }
      case "Escape":
        event.preventDefault();
        if (skipPanel() && skipPanel().open) closeSkip();
        else document.getElementById("item")?.focus({ preventScroll: true }); // leave a rating row
        return;
      case "s":
      case "S":
        event.preventDefault();
        openSkip();
        return;
      case "u":
      case "U": {
        event.preventDefault();
        const box = unacceptableBox();
        if (box) {
          box.checked = !box.checked;
          box.dispatchEvent(new Event("change", { bubbles: true }));
        }
        return;
      }
      case "w":
      case "W":
        event.preventDefault();
        if (reasonBoxes().length && !focusGroup("[data-reasons]")) hint(message("noReasons"));
        return;
      case "c":
      case "C":
        event.preventDefault();
        focusGroup("[data-confidence]");
        return;
      case "r":
      case "R": {
        event.preventDefault();
        inForm("textarea")?.focus();
        return;
      }
      case "d":
      case "D": {
        event.preventDefault();
        const details = toggleDetails(inForm("[data-ratings]"));
        if (details && details.open) details.querySelector('input[type="radio"]:checked')?.focus({ preventScroll: true });
        return;
      }
      case "g":
      case "G":
        event.preventDefault();
        toggleDetails(document.querySelector(".rate-guidelines"));
        return;
      default:
    }
  });

  setUp({ focus: false });
})();
