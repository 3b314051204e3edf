// Small page helpers; no framework. htmx does the partial updates.
document.addEventListener("change", (event) => {
  const box = event.target.closest("[data-check-all]");
  if (!box) return;
  const form = box.closest("form");
  form.querySelectorAll(`input[name="${box.dataset.checkAll}"]`).forEach((el) => {
    el.checked = box.checked;
  });
});
