/**
 * Dependencies point down (docs/development.md "Layers"). A module may import only from its own
 * layer or a lower one, and nothing may form a cycle, type-only imports included: a type cycle
 * still means two modules cannot be understood apart. No exceptions are listed here on purpose;
 * fix a violation at its cause (move the shared piece down) instead of allowing it.
 *
 * Layers, lowest first:
 *   0 common   src/common/, src/config.ts and src/config/ (a leaf)
 *   1 db       src/db/ (ORM set-up, migrations, pg error classifiers, bound-sql)
 *   2 domain   src/accounts, addresses, numbers, leases, messaging, mail, webhooks, admin, optouts, limits, billing, senderids
 *   3 delivery src/delivery/ (owns the Carrier interface and segment tracking)
 *   4 carriers src/carriers/
 *   5 edge     src/http, rpc, rest, openapi, ops, console, smpp-server
 *   6 top      src/app.ts, main.ts, worker.ts, first-start.ts, bootstrap.ts, entities.ts (the ORM's entity list), src/cli/
 */
const common = '^src/(common/|config\\.ts$|config/)';
const db = '^src/db/';
const domain = '^src/(accounts|addresses|numbers|leases|messaging|mail|webhooks|admin|optouts|limits|billing|senderids)/';
const delivery = '^src/delivery/';
const carriers = '^src/carriers/';
const edge = '^src/(http|rpc|rest|openapi|ops|console|smpp-server)/';
const top = '^src/(app|main|worker|first-start|bootstrap|entities)\\.ts$|^src/cli/';

/** The higher layers' patterns as one path pattern. */
const above = (...higher) => higher.join('|');

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import cycle (type-only imports count): move the shared piece one layer down.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    {
      name: 'every-module-has-a-layer',
      severity: 'error',
      comment: 'A new folder under src/ takes its place in one of the layers above before it imports anything.',
      from: { path: '^src/', pathNot: [common, db, domain, delivery, carriers, edge, top].join('|') },
      to: {},
    },
    {
      name: 'config-is-a-leaf',
      severity: 'error',
      comment: 'config.ts and config/ read the environment and import nothing of ours but each other; defaults live in config/variables.ts.',
      from: { path: '^src/(config\\.ts$|config/)' },
      to: { path: '^src/', pathNot: '^src/(config\\.ts$|config/)' },
    },
    {
      name: 'common-imports-only-common',
      severity: 'error',
      from: { path: '^src/common/' },
      to: { path: '^src/', pathNot: common },
    },
    {
      name: 'db-imports-only-down',
      severity: 'error',
      comment: 'db must not reach entities or stores in the domain folders: they are passed in.',
      from: { path: db },
      to: { path: above(domain, delivery, carriers, edge, top) },
    },
    {
      name: 'domain-imports-only-down',
      severity: 'error',
      from: { path: domain },
      to: { path: above(delivery, carriers, edge, top) },
    },
    {
      name: 'delivery-imports-only-down',
      severity: 'error',
      from: { path: delivery },
      to: { path: above(carriers, edge, top) },
    },
    {
      name: 'carriers-import-only-down',
      severity: 'error',
      from: { path: carriers },
      to: { path: above(edge, top) },
    },
    {
      name: 'edge-imports-only-down',
      severity: 'error',
      from: { path: edge },
      to: { path: top },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(gen|node_modules)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js', '.mjs', '.cjs', '.json'] },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
