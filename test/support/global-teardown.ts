export default async function globalTeardown(): Promise<void> {
  await (globalThis as { __dbadminStopDatabase?: () => Promise<void> }).__dbadminStopDatabase?.();
}
