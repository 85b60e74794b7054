/** The records tests expect the API to answer, field for field. */

/** A Received message (an inbound SMS stored for an account) as GET /v2/Messages/{MessageSid} answers it. */
export function receivedRecord(m: {
  sid: string;
  accountSid: string;
  propertySid: string;
  from: string;
  to: string;
  text: string;
  encoding: string;
  at: number;
}): Record<string, unknown> {
  return {
    MessageSid: m.sid,
    AccountSid: m.accountSid,
    PropertySid: m.propertySid,
    From: m.from,
    To: m.to,
    Text: m.text,
    Direction: "Receive",
    Status: "Received",
    NumSegments: 1,
    Encoding: m.encoding,
    SmartEncoded: false,
    Price: "",
    PriceUnit: "AUD",
    DeliveryReceipt: false,
    Schedule: 0,
    Created: m.at,
    Submitted: 0,
    Delivered: 0,
    Received: m.at,
    ErrorCode: "",
    CarrierError: "",
    Redacted: false,
    Carrier: "",
  };
}
