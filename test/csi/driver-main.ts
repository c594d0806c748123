// The test CSI driver as its own process (so a test can kill -9 it or restart
// it): node test/csi/driver-main.ts <socket> <stateDir>. SIGTERM stops it and
// removes its socket.
import { startTestDriver } from './driver.ts';

const [socket, stateDir] = process.argv.slice(2);
if (!socket || !stateDir) {
  process.stderr.write('usage: driver-main.ts <socket> <stateDir>\n');
  process.exit(2);
}
const driver = await startTestDriver(socket, stateDir);
process.stdout.write('ready\n');
const stop = () => void driver.stop().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
