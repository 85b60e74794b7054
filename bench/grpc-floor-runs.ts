/**
 * The runs of the gRPC floors (bench/grpc-floor-servers.ts, in the bare server's process): h2load
 * with the service's gRPC run's settings and its very request (body, headers), only the URL
 * changed. Made when `floor` or `grpc` is in BENCH_ONLY, so that the gRPC gap can be split in the
 * same run as the REST floor and the service's runs (docs/benchmarks.md, "How to run").
 */
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { MessagingService } from "../gen/switchboard/v2/messaging_pb.js";
import { type GrpcRequestSpec, h2load, type LoadResult, type LoadSettings } from "./load.js";
import { type BenchTarget, checkedByCount, type Measured } from "./service-runs.js";

/** The two floors: their run keys, table rows and ports (in the bare server's environment). */
export const GRPC_FLOORS = [
  { key: "floor-h2", name: "Floor h2: node:http2 + gRPC framing, batched INSERT", portEnv: "BARE_H2_PORT" },
  { key: "floor-connect", name: "Floor Connect: connect-node on h2c, batched INSERT", portEnv: "BARE_CONNECT_PORT" },
] as const;

const storedRows = async (t: BenchTarget) => Number((await t.db.query("select count(*)::int as n from bench_bare")).rows[0].n);

/**
 * The floors' runs for the bench's round loop: a real gRPC call to each first (h2load reads no
 * trailers), then per run a warm-up and the measured h2load run with the bare server's CPU and
 * the database's charged to it; every HTTP 200 must be a stored row.
 */
export async function grpcFloorRuns(o: {
  only: Set<string>;
  target: BenchTarget;
  ports: Record<(typeof GRPC_FLOORS)[number]["portEnv"], number>;
  grpcReq: GrpcRequestSpec;
  load: LoadSettings;
  warm: LoadSettings;
  /** Before each run: the service's queue drained, as before the other floors' runs. */
  settle: () => Promise<unknown>;
  measure: (go: () => Promise<LoadResult>) => Promise<Omit<Measured, "note">>;
}): Promise<{ key: string; go: () => Promise<Measured> }[]> {
  if (!o.only.has("floor") && !o.only.has("grpc")) return [];
  return Promise.all(
    GRPC_FLOORS.map(async ({ key, portEnv }) => {
      const base = `http://127.0.0.1:${o.ports[portEnv]}`;
      const client = createClient(MessagingService, createGrpcTransport({ baseUrl: base }));
      const sent = await client.sendMessage({ from: "+447700900001", to: "+447700900123", text: "floor check" });
      if (!sent.messageSid) throw new Error(`${key}: the gRPC check call returned no MessageSid`);
      const req = { ...o.grpcReq, url: `${base}${new URL(o.grpcReq.url).pathname}` };
      return {
        key,
        go: async (): Promise<Measured> => {
          await o.settle();
          await h2load(req, o.warm);
          return checkedByCount(
            () => storedRows(o.target),
            () => o.measure(() => h2load(req, o.load)),
            "HTTP 200",
          );
        },
      };
    }),
  );
}
