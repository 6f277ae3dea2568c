// Typeset every formula that pymdownx.arithmatex (generic mode) marked, with the KaTeX copy the site
// serves itself (assets/katex/): \( … \) inline, \[ … \] displayed. A formula KaTeX cannot read stays
// as its TeX source, in red, with the reason in its tooltip.
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll(".arithmatex").forEach(function (el) {
    renderMathInElement(el, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
      throwOnError: false,
    });
  });
});
