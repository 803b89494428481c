// Starts Swagger UI on /schema (an inline script would be refused by the page's CSP).
"use strict";
window.addEventListener("DOMContentLoaded", function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.dataset.specUrl,
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
  });
});
