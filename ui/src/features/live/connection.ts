// Whether the server is reachable, as the last request and the live stream saw it (one owner: this store).
type Listener = () => void;

class ConnectionState {
  private online = true;
  private stream = true;
  private listeners = new Set<Listener>();

  /** A request reached the server (true) or failed on the network (false). */
  report(ok: boolean): void {
    this.set(ok, this.stream);
  }

  /** The live stream is connected (true) or reconnecting (false). */
  reportStream(ok: boolean): void {
    this.set(this.online, ok);
  }

  private set(online: boolean, stream: boolean): void {
    if (online === this.online && stream === this.stream) return;
    this.online = online;
    this.stream = stream;
    this.listeners.forEach((l) => l());
  }

  lost = (): boolean => !this.online || !this.stream;

  subscribe = (listener: Listener): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };
}

export const connection = new ConnectionState();
