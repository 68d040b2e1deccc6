"""The memory console: pages for people, served at ``/console`` by the response service.

One HTML shell for every view (``/console``, ``/console/users/{user_id}``), a script and a style
sheet from the wheel: no build step, nothing fetched from the internet. The pages hold no data:
the script reads everything through the public API with the key the person typed, kept in the
tab's session storage and sent in the Authorization header, never in a URL. So the console can
do exactly what the key may do, and the API refuses the rest.

The Content-Security-Policy allows only this origin's script and style: were some text ever
put into the page as markup, it could not run.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI, Path
from fastapi.responses import JSONResponse, Response

ASSETS = {"console.js": "text/javascript", "console.css": "text/css", "icon.svg": "image/svg+xml"}
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; form-action 'none'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _asset(name: str) -> bytes:
    return resources.files("service").joinpath("console", name).read_bytes()


def add_console_routes(app: FastAPI) -> None:
    shell = _asset("index.html")
    assets = {name: _asset(name) for name in ASSETS}

    def page() -> Response:
        return Response(shell, media_type="text/html; charset=utf-8", headers=HEADERS)

    @app.get("/console", include_in_schema=False)
    async def console() -> Response:
        return page()

    @app.get("/console/users/{user_id}", include_in_schema=False)
    async def console_user(user_id: str) -> Response:
        return page()  # the script reads the id from the address and checks it

    @app.get("/console/assets/{name}", include_in_schema=False)
    async def console_asset(name: str = Path(max_length=32)) -> Response:
        if name not in assets:
            return JSONResponse({"error": f"no console asset {name!r}", "field": None}, 404)
        return Response(assets[name], media_type=ASSETS[name], headers=HEADERS)
