// The practice page: the rating page's keys (1–5 choose, Enter submits) and Enter to go on
// after the feedback. Without JavaScript the form posts and the links work as usual.
(() => {
  "use strict";

  const page = document.querySelector("[data-practice-page]");
  if (!page) return;
  const form = page.querySelector("[data-practice-form]");
  const radios = () => Array.from(form ? form.querySelectorAll('input[name="preference"]') : []);
  const chosen = () => radios().find((radio) => radio.checked) || null;

  function hint(text) {
    const box = page.querySelector("[data-hint]");
    if (box) box.textContent = text;
  }
  function isTyping(element) {
    if (!element) return false;
    if (element.isContentEditable || element.tagName === "TEXTAREA" || element.tagName === "SELECT") return true;
    return element.tagName === "INPUT" && !["radio", "checkbox", "button", "submit"].includes(element.type);
  }

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || event.isComposing) return;
    if (isTyping(event.target)) return;
    const key = event.key;
    if (form && /^[1-5]$/.test(key)) {
      event.preventDefault();
      const radio = radios()[Number(key) - 1];
      radio.checked = true;
      radio.focus({ preventScroll: true });
      hint("");
      return;
    }
    if (key !== "Enter") return;
    const tag = event.target.tagName;
    if (tag === "BUTTON" || tag === "A" || tag === "SUMMARY") return; // their own action
    event.preventDefault();
    if (form) {
      if (!chosen()) return hint(page.querySelector("[data-hint]").dataset.choose);
      form.requestSubmit();
      return;
    }
    const next = page.querySelector("[data-continue], [data-start-rating], [data-retry]");
    if (next) next.click();
  });

  // Submitting without a preference says why by the button, not in the browser's bubble.
  if (form) {
    form.noValidate = true;
    form.addEventListener("submit", (event) => {
      if (chosen()) return;
      event.preventDefault();
      hint(page.querySelector("[data-hint]").dataset.choose);
    });
    page.querySelector("#item")?.focus({ preventScroll: true });
  }
  page.dataset.keys = "on"; // the keys work from here on
})();
