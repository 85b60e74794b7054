/**
 * Serves the API description: `GET /openapi.json` (built from the descriptors on its first
 * request, then kept) and `GET /docs`, a Swagger UI page whose assets come from the installed
 * swagger-ui-dist package (no CDN). Both are public: they describe the API, they do not call it.
 */
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { DescService } from "@bufbuild/protobuf";
import type { FastifyInstance } from "fastify";
import { buildOpenApi } from "./openapi.js";
import { loadProtoComments } from "./proto-comments.js";

/** The services to describe, and overrides for tests. */
export interface ApiDocsOptions {
  services: DescService[];
  /** info.version; default: the version in package.json. */
  version?: string;
  /** Proto comments by full name; default: read from gen/descriptors.binpb. */
  comments?: ReadonlyMap<string, string>;
}

/** The swagger-ui-dist files the page loads, served under /docs/assets/. */
const ASSETS: Record<string, string> = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
  "favicon-32x32.png": "image/png",
  "favicon-16x16.png": "image/png",
};

/** Relative URLs, so that the page also works behind a proxy that mounts the service under a prefix. */
const DOCS_HTML = `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Switchboard API</title>
  <link rel="stylesheet" href="docs/assets/swagger-ui.css">
  <link rel="icon" type="image/png" href="docs/assets/favicon-32x32.png" sizes="32x32">
  <link rel="icon" type="image/png" href="docs/assets/favicon-16x16.png" sizes="16x16">
  <style>body { margin: 0; }</style>
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="docs/assets/swagger-ui-bundle.js"></script>
  <script>
    window.ui = SwaggerUIBundle({
      url: "openapi.json",
      dom_id: "#swagger-ui",
      deepLinking: true,
      // The default would ask validator.swagger.io about the document.
      validatorUrl: null,
      presets: [SwaggerUIBundle.presets.apis],
      layout: "BaseLayout",
    });
  </script>
</body>
</html>
`;

/** A Fastify plugin: GET /openapi.json, GET /docs and its assets, without authentication. */
export async function apiDocsPlugin(app: FastifyInstance, opts: ApiDocsOptions): Promise<void> {
  // Built when first asked for, not at start: most processes are never asked, and the build (the
  // descriptor set with source info parsed, the document) would otherwise be start-up garbage in
  // every one, and its ~170 KB of JSON held by each (docs/benchmarks.md, Memory).
  let json: string | undefined;
  const documentJson = () =>
    (json ??= JSON.stringify(
      buildOpenApi(opts.services, {
        version: opts.version ?? packageVersion(),
        comments: opts.comments ?? loadProtoComments(),
        description:
          "The REST API of Switchboard, generated from its protobuf descriptors. The same methods are " +
          "served over Connect, gRPC and gRPC-Web on this port. Errors are JSON: " +
          '`{"ResponseStatus": {"ErrorCode", "Message", "Errors": [{"FieldName", "ErrorCode", "Message"}]}}`.',
      }),
    ));

  app.get("/openapi.json", async (_request, reply) => reply.header("content-type", "application/json; charset=utf-8").send(documentJson()));
  app.get("/docs", async (_request, reply) => reply.header("content-type", "text/html; charset=utf-8").send(DOCS_HTML));

  const assetDir = dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
  const cache = new Map<string, Buffer>();
  app.get<{ Params: { file: string } }>("/docs/assets/:file", async (request, reply) => {
    const { file } = request.params;
    const type = Object.hasOwn(ASSETS, file) ? ASSETS[file] : undefined;
    if (type === undefined) return reply.callNotFound();
    let body = cache.get(file);
    if (!body) cache.set(file, (body = await readFile(join(assetDir, file))));
    return reply.header("content-type", type).header("cache-control", "public, max-age=3600").send(body);
  });
}

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version?: string };
  return pkg.version ?? "0.0.0";
}
