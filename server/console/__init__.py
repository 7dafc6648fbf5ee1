"""The admin console: server-rendered pages under ``/console`` for admins, auditors,
evaluators and reviewers.

* ``app.install_console`` mounts it: the pages' routers, the static files, the security
  headers (``security``) and HTML error pages for ``/console`` paths.
* ``dependencies``: the logged-in user from the cookie (``server.auth.console_logins``),
  page permissions, and CSRF-checked forms.
* ``templating``: the Jinja2 environment (autoescaped) and ``render``; ``templates/`` the
  pages; ``static/`` our own stylesheet and script (no third-party file, no build step).
* ``plots``: SVG charts drawn on the server (pure functions); ``pagination``: table pages.
* ``pages/``: one module per page, each a thin router over the same services the JSON API
  uses (never SQL of its own), declaring its own menu entry (``NAV``); ``app.PAGES`` lists
  them once, and ``nav`` builds the menu from their entries.
"""
