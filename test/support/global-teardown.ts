export default async function globalTeardown(): Promise<void> {
  const run = globalThis as {
    __dbadminStopDatabase?: () => Promise<void>;
    __dbadminRemoveTmpdir?: () => void;
  };
  try {
    await run.__dbadminStopDatabase?.();
  } finally {
    run.__dbadminRemoveTmpdir?.();
    delete run.__dbadminStopDatabase;
    delete run.__dbadminRemoveTmpdir;
  }
}
