// Types for the parts of the `smpp` package (0.5.1) the SMPP server uses beyond the carrier's
// (src/carriers/smpp/smpp-module.d.ts): the encoder of the PDUs it sends.
declare module "smpp" {
  interface PDU {
    toBuffer(): Buffer;
  }
}
