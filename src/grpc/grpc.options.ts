import { join } from 'node:path';
import { GrpcOptions, Transport } from '@nestjs/microservices';
import { hostPort } from '../net/listen-address';

/** Where the API's contract lives (copied next to the build by nest-cli.json's assets). */
export const DURAFLOW_PROTO_PATH = join(__dirname, 'duraflow.proto');
export const DURAFLOW_GRPC_PACKAGE = 'duraflow.v1';

/**
 * The gRPC server's options: the proto's enums as their names, int64 as strings, unset fields
 * as defaults; requests up to `maxMessageBytes` (the HTTP body limit, so an input over the
 * engine's limit reaches the library and gets its typed error).
 */
export function duraflowGrpcOptions(port: number, host: string, maxMessageBytes: number): GrpcOptions {
  return {
    transport: Transport.GRPC,
    options: {
      package: DURAFLOW_GRPC_PACKAGE,
      protoPath: DURAFLOW_PROTO_PATH,
      url: hostPort(host, port),
      maxReceiveMessageLength: maxMessageBytes,
      loader: { keepCase: true, enums: String, longs: String, defaults: true, oneofs: true },
    },
  };
}
