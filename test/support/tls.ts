/** A self-signed certificate for localhost made by openssl, for tests of TLS listeners. */
import { execFileSync } from "node:child_process";
import { join } from "node:path";

/** Writes key.pem and cert.pem (CN and subjectAltName localhost, valid a day) into `dir`; their paths. */
export function selfSignedCert(dir: string): { keyPath: string; certPath: string } {
  const keyPath = join(dir, "key.pem");
  const certPath = join(dir, "cert.pem");
  execFileSync(
    "openssl",
    [
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-days",
      "1",
      "-subj",
      "/CN=localhost",
      "-addext",
      "subjectAltName=DNS:localhost",
      "-keyout",
      keyPath,
      "-out",
      certPath,
    ],
    { stdio: "ignore" },
  );
  return { keyPath, certPath };
}
