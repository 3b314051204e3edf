// Sortable tables without a library: <table data-sortable> with <th data-sort="num|text">.
// A cell may carry data-sort-value (numbers sort by it; empty values always go last).
(function () {
  "use strict";

  function cellValue(row, index, numeric) {
    const cell = row.cells[index];
    if (!cell) return numeric ? null : "";
    const raw = cell.hasAttribute("data-sort-value")
      ? cell.getAttribute("data-sort-value")
      : cell.textContent;
    if (!numeric) return raw.trim().toLowerCase();
    const number = parseFloat(raw);
    return Number.isFinite(number) ? number : null;
  }

  function sortBy(table, header) {
    const index = Array.prototype.indexOf.call(header.parentNode.cells, header);
    const numeric = header.dataset.sort === "num";
    const ascending = header.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th[aria-sort]").forEach((th) => th.removeAttribute("aria-sort"));
    header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    const body = table.tBodies[0];
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = cellValue(a, index, numeric);
      const y = cellValue(b, index, numeric);
      if (x === null || x === "") return y === null || y === "" ? 0 : 1;
      if (y === null || y === "") return -1;
      const order = numeric ? x - y : x.localeCompare(y);
      return ascending ? order : -order;
    });
    rows.forEach((row) => body.appendChild(row));
  }

  function setUp(table) {
    table.querySelectorAll("thead th[data-sort]").forEach((header) => {
      header.tabIndex = 0;
      header.title = typeof window.gettext === "function" ? window.gettext("Sort by this column") : "Sort by this column";
      header.addEventListener("click", () => sortBy(table, header));
      header.addEventListener("keydown", (event) => {
        if (event.key === "Enter" || event.key === " ") {
          event.preventDefault();
          sortBy(table, header);
        }
      });
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    document.querySelectorAll("table[data-sortable]").forEach(setUp);
  });
})();
