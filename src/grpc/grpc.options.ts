import { join } from 'node:path';
import { GrpcOptions, Transport } from '@nestjs/microservices';

/** Where the API's contract lives (copied next to the build by nest-cli.json's assets). */
export const DURAFLOW_PROTO_PATH = join(__dirname, 'duraflow.proto');
export const DURAFLOW_GRPC_PACKAGE = 'duraflow.v1';

/** The gRPC server's options: the proto's enums as their names, int64 as strings, unset fields as defaults. */
export function duraflowGrpcOptions(port: number, host = '0.0.0.0'): GrpcOptions {
  return {
    transport: Transport.GRPC,
    options: {
      package: DURAFLOW_GRPC_PACKAGE,
      protoPath: DURAFLOW_PROTO_PATH,
      url: `${host}:${port}`,
      loader: { keepCase: true, enums: String, longs: String, defaults: true, oneofs: true },
    },
  };
}
