// The two rate-limiter-flexible modules auth-failures.ts imports directly (the package's README
// documents `rate-limiter-flexible/lib/RateLimiterMemory.js`); the package types only its index.
declare module "rate-limiter-flexible/lib/RateLimiterMemory.js" {
  export { RateLimiterMemory as default } from "rate-limiter-flexible";
}
declare module "rate-limiter-flexible/lib/RateLimiterRes.js" {
  export { RateLimiterRes as default } from "rate-limiter-flexible";
}
