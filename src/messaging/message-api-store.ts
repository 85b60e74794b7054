/**
 * Statements on `messages` for the customer API's reads and cancel (GetMessage, ListMessages,
 * CancelMessage): cold paths, through the EntityManager. The send's and the delivery engine's
 * statements, hand-written and bound, are in message-store.ts.
 */
import type { EntityManager } from "@mikro-orm/sql";
import type { Page } from "../accounts/account-store.js";
import { Message, type MessageDirection, type MessageStatus } from "./message.entity.js";

/** The account's message with this Sid, or null. */
export function findAccountMessage(em: EntityManager, sid: string, accountSid: string): Promise<Message | null> {
  return em.findOne(Message, { sid, accountSid });
}

/** The message as the database has it now (after a change by a statement, not through the entity). */
export function reloadMessage(em: EntityManager, sid: string): Promise<Message> {
  return em.findOneOrFail(Message, { sid }, { refresh: true });
}

/** Which messages of a property a list takes: created in [createdFrom, createdTo), with this status and direction; absent fields match any. */
export interface MessageFilter {
  propertySid: string;
  createdFrom?: Date;
  createdTo?: Date;
  status?: MessageStatus;
  direction?: MessageDirection;
}

/** A page of a property's messages, newest first, and how many match. */
export function listMessages(em: EntityManager, filter: MessageFilter, page: Page): Promise<[Message[], number]> {
  const created: Record<string, Date> = {};
  if (filter.createdFrom !== undefined) created.$gte = filter.createdFrom;
  if (filter.createdTo !== undefined) created.$lt = filter.createdTo;
  const where = {
    propertySid: filter.propertySid,
    ...(Object.keys(created).length > 0 ? { createdAt: created } : {}),
    ...(filter.status !== undefined ? { status: filter.status } : {}),
    ...(filter.direction !== undefined ? { direction: filter.direction } : {}),
  } as Parameters<typeof em.find<Message>>[1];
  return em.findAndCount(Message, where, { orderBy: { createdAt: "desc", sid: "desc" }, limit: page.limit, offset: page.offset });
}

/** Cancels the message if it is still Scheduled: a conditional update, so a dispatcher that claimed it first wins. Whether it was canceled. */
export async function cancelScheduledMessage(em: EntityManager, sid: string): Promise<boolean> {
  return (await em.nativeUpdate(Message, { sid, status: "Scheduled" }, { status: "Canceled" })) === 1;
}
