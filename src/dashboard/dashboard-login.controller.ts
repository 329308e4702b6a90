import { Body, Controller, Get, Headers, HttpStatus, Inject, Post, Req, Res } from '@nestjs/common';
import { IsString, MaxLength } from 'class-validator';
import { Public, sameSecret } from '../auth/api-key.guard';
import { EngineConfig } from '../config/engine.config';
import { ENGINE_CONFIG } from '../config/engine-config.token';
import {
  DASHBOARD_PATH,
  DASHBOARD_SESSION_COOKIE,
  DASHBOARD_SESSION_SECONDS,
  dashboardSessionToken,
  readCookie,
} from './dashboard-session';
import { LOGIN_PAGE_HEADERS, LoginState, loginPage } from './login-page';

/** The parts of Express's request and response used here (the engine runs on Express). */
interface LoginRequest {
  secure: boolean;
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
 * the key and sets the session cookie the API-key guard accepts on /duraflow. Public routes
 * (the way in must be open); they change nothing but the caller's own cookie.
 */
@Controller(DASHBOARD_PATH)
@Public()
export class DashboardLoginController {
  constructor(@Inject(ENGINE_CONFIG) private readonly config: EngineConfig) {}

  @Get('login')
  form(@Headers('cookie') cookie: string | undefined, @Res() response: LoginResponse): void {
    const signedIn =
      this.config.apiKey !== undefined && readCookie(cookie, DASHBOARD_SESSION_COOKIE) === dashboardSessionToken(this.config.apiKey);
    this.page(response, HttpStatus.OK, this.config.apiKey === undefined ? 'no-key' : signedIn ? 'signed-in' : 'form');
  }

  @Post('login')
  signIn(@Body() form: DashboardLoginForm, @Req() request: LoginRequest, @Res() response: LoginResponse): void {
    const key = this.config.apiKey;
    if (key === undefined) return this.page(response, HttpStatus.OK, 'no-key');
    if (!sameSecret(form.apiKey, key)) return this.page(response, HttpStatus.UNAUTHORIZED, 'wrong-key');
    response.cookie(DASHBOARD_SESSION_COOKIE, dashboardSessionToken(key), {
      httpOnly: true,
      sameSite: 'strict',
      secure: request.secure,
      path: DASHBOARD_PATH,
      maxAge: DASHBOARD_SESSION_SECONDS * 1000,
    });
    response.redirect(HttpStatus.SEE_OTHER, DASHBOARD_PATH);
  }

  @Post('logout')
  signOut(@Req() request: LoginRequest, @Res() response: LoginResponse): void {
    response.clearCookie(DASHBOARD_SESSION_COOKIE, { httpOnly: true, sameSite: 'strict', secure: request.secure, path: DASHBOARD_PATH });
    response.redirect(HttpStatus.SEE_OTHER, `${DASHBOARD_PATH}/login`);
  }

  private page(response: LoginResponse, status: number, state: LoginState): void {
    response.status(status).set(LOGIN_PAGE_HEADERS).send(loginPage(state));
  }
}
