import { Body, Controller, Get, Headers, HttpStatus, Inject, Post, Req, Res } from '@nestjs/common';
import { IsString, MaxLength } from 'class-validator';
import { Public, sameSecret } from '../auth/api-key.guard';
import { EngineConfig } from '../config/engine.config';
import { ENGINE_CONFIG } from '../config/engine-config.token';
import { DASHBOARD_PATH, DASHBOARD_SESSION_COOKIE, readCookie } from './dashboard-session';
import { DashboardSessions } from './dashboard-sessions';
import { LOGIN_PAGE_HEADERS, LoginState, loginPage } from './login-page';
import { SignInThrottle } from './sign-in-throttle';

/** The parts of Express's request and response used here (the engine runs on Express). */
interface LoginRequest {
  /** Over HTTPS, directly or through a proxy DURAFLOW_TRUST_PROXY names. */
  secure: boolean;
  /** The client's address (the proxy's client with DURAFLOW_TRUST_PROXY). */
  ip?: string;
  headers: Record<string, string | string[] | undefined>;
}
interface LoginResponse {
  status(code: number): LoginResponse;
  set(headers: Readonly<Record<string, string>>): LoginResponse;
  send(body: string): void;
  cookie(name: string, value: string, options: Record<string, unknown>): void;
  clearCookie(name: string, options: Record<string, unknown>): void;
  redirect(status: number, url: string): void;
}

export class DashboardLoginForm {
  @IsString()
  @MaxLength(4096)
  apiKey: string;
}

/**
 * How a browser signs in to the engine's dashboard when DURAFLOW_API_KEY is set: a form takes
 * the key (throttled per client address, SignInThrottle) and sets the cookie of a new session
 * (DashboardSessions) that the API-key guard accepts on /duraflow; signing out ends the session
 * on the server. Public routes (the way in must be open); they change nothing but the caller's
 * own session.
 */
@Controller(DASHBOARD_PATH)
@Public()
export class DashboardLoginController {
  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly sessions: DashboardSessions,
    private readonly throttle: SignInThrottle,
  ) {}

  @Get('login')
  form(@Headers('cookie') cookie: string | undefined, @Res() response: LoginResponse): void {
    const signedIn = this.config.apiKey !== undefined && this.sessions.use(readCookie(cookie, DASHBOARD_SESSION_COOKIE));
    this.page(response, HttpStatus.OK, this.config.apiKey === undefined ? 'no-key' : signedIn ? 'signed-in' : 'form');
  }

  @Post('login')
  signIn(@Body() form: DashboardLoginForm, @Req() request: LoginRequest, @Res() response: LoginResponse): void {
    const key = this.config.apiKey;
    if (key === undefined) return this.page(response, HttpStatus.OK, 'no-key');
    const address = request.ip ?? 'unknown';
    const wait = this.throttle.waitSeconds(address);
    if (wait > 0) {
      response.set({ 'Retry-After': String(wait) });
      return this.page(response, HttpStatus.TOO_MANY_REQUESTS, 'throttled');
    }
    if (!sameSecret(form.apiKey, key)) {
      this.throttle.failed(address);
      return this.page(response, HttpStatus.UNAUTHORIZED, 'wrong-key');
    }
    this.throttle.succeeded(address);
    response.cookie(DASHBOARD_SESSION_COOKIE, this.sessions.create(), {
      ...cookieOptions(request),
      maxAge: this.sessions.maxAgeMs,
    });
    response.redirect(HttpStatus.SEE_OTHER, DASHBOARD_PATH);
  }

  @Post('logout')
  signOut(@Req() request: LoginRequest, @Res() response: LoginResponse): void {
    const cookie = request.headers.cookie;
    this.sessions.end(readCookie(Array.isArray(cookie) ? cookie[0] : cookie, DASHBOARD_SESSION_COOKIE));
    response.clearCookie(DASHBOARD_SESSION_COOKIE, cookieOptions(request));
    response.redirect(HttpStatus.SEE_OTHER, `${DASHBOARD_PATH}/login`);
  }

  private page(response: LoginResponse, status: number, state: LoginState): void {
    response.status(status).set(LOGIN_PAGE_HEADERS).send(loginPage(state));
  }
}

/** No script reads it, no other site's page makes the browser send it, sent to the dashboard only, and over HTTPS only when it came so. */
function cookieOptions(request: LoginRequest): Record<string, unknown> {
  return { httpOnly: true, sameSite: 'strict', secure: request.secure, path: DASHBOARD_PATH };
}
