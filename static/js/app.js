// Small page helpers; no framework. htmx does the partial updates.
document.addEventListener("change", (event) => {
  const box = event.target.closest("[data-check-all]");
  if (!box) return;
  const form = box.closest("form");
  form.querySelectorAll(`input[name="${box.dataset.checkAll}"]`).forEach((el) => {
    el.checked = box.checked;
  });
});

// A box that scrolls (a wide table on a phone, a long answer) can be scrolled from the keyboard:
// while it has more to show than fits, it takes focus (tabindex 0, unless it had its own) and
// carries data-overflowing, which the stylesheet uses for its outline and a ".scroll-hint" just
// before it. Checked again when the window resizes, a <details> opens and htmx swaps content.
(function () {
  "use strict";
  const SCROLLING = ["auto", "scroll"];

  function overflows(box, style) {
    const sideways = SCROLLING.includes(style.overflowX) && box.scrollWidth > box.clientWidth + 1;
    const down = SCROLLING.includes(style.overflowY) && box.scrollHeight > box.clientHeight + 1;
    return sideways || down;
  }

  function mark() {
    document.querySelectorAll("main *").forEach((box) => {
      const scrolls = overflows(box, getComputedStyle(box));
      if (scrolls === box.hasAttribute("data-overflowing")) return;
      box.toggleAttribute("data-overflowing", scrolls);
      if (scrolls && !box.hasAttribute("tabindex")) {
        box.tabIndex = 0;
        box.dataset.scrollFocus = "";
      } else if (!scrolls && box.hasAttribute("data-scroll-focus")) {
        box.removeAttribute("tabindex");
        box.removeAttribute("data-scroll-focus");
      }
    });
  }

  let pending = false;
  function later() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => {
      pending = false;
      mark();
    });
  }

  document.addEventListener("DOMContentLoaded", mark);
  window.addEventListener("load", later);
  window.addEventListener("resize", later);
  document.addEventListener("toggle", later, true);
  document.addEventListener("htmx:afterSettle", later);
})();

// A destructive action's button carries data-confirm (the question): it asks with the browser's
// dialog before posting and, confirmed, sends confirmed=1 so the server does not ask again on
// its own page (h2htalk/confirmation.py, which asks when scripts do not run).
document.addEventListener("submit", (event) => {
  const button = event.submitter;
  if (!button || !button.dataset.confirm) return;
  if (!window.confirm(button.dataset.confirm)) {
    event.preventDefault();
    return;
  }
  const form = event.target;
  if (!form.querySelector('input[name="confirmed"]')) {
    const flag = document.createElement("input");
    flag.type = "hidden";
    flag.name = "confirmed";
    flag.value = "1";
    form.append(flag);
  }
});
