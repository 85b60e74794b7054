/**
 * CPU µs per gRPC call through the whole served path (h2c, Fastify, Connect, our interceptors and
 * handler wrappers) without any database work: an unauthenticated SendMessage, refused at the edge.
 * For comparing changes to the RPC path; the machine's other load shows as spread between rounds.
 * Usage: npx node --import tsx bench/rpc-path-cpu.ts   (PORT to change the port, default 18555)
 */

import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { create, toBinary } from "@bufbuild/protobuf";
import { SendMessageRequestSchema } from "../gen/switchboard/v2/messaging_pb.js";
import { createTestApp } from "../test/support/harness.js";
import { grpcFrame } from "./load.js";

const t = await createTestApp();
const port = Number(process.env.PORT ?? 18555);
await t.app.listen({ port, host: "127.0.0.1" });
const msg = toBinary(
  SendMessageRequestSchema,
  create(SendMessageRequestSchema, { propertySid: "PR1", from: "+447700900001", to: "+447700900123", text: "hello" }),
);
mkdirSync("/tmp/micro", { recursive: true });
writeFileSync("/tmp/micro/body.bin", grpcFrame(msg));
/** CPU µs of this process per call while h2load makes `n` calls on 10 connections. */
const runAsync = (n: number) =>
  new Promise<number>((resolve) => {
    const before = process.cpuUsage();
    const c = spawn(
      "h2load",
      [
        "-n",
        String(n),
        "-c",
        "10",
        "-m",
        "1",
        "-d",
        "/tmp/micro/body.bin",
        "-H",
        "content-type: application/grpc",
        "-H",
        "te: trailers",
        `http://127.0.0.1:${port}/switchboard.v2.MessagingService/SendMessage`,
      ],
      { stdio: "ignore" },
    );
    c.on("exit", () => {
      const d = process.cpuUsage(before);
      resolve((d.user + d.system) / n);
    });
  });
await runAsync(5000);
const out: number[] = [];
for (let i = 0; i < 4; i++) out.push(await runAsync(10000));
console.log(`grpc unauth CPU µs/req: ${out.map((x) => x.toFixed(0)).join(" ")}  min ${Math.min(...out).toFixed(0)}`);
await t.close();
