//! HELD-OUT set of issue 33: secrets where no rule looked, and look-alikes that must survive,
//! in the eleven places the issue lists. FROZEN before any tuning for it: its blind score is in
//! the commit that froze it and in `docs/sanitizer.md`. Do not edit to make a case pass; tune on
//! `places_tuning.rs`.
//!
//! Formats are modelled on public documentation (man pages, protocol RFCs, vendors' docs) of
//! tools and providers that no rule, no page of the docs and no earlier set names. Each entry is
//! `(place, template)`; placeholders are filled at test time (`generic_fill.rs`): every
//! non-`~` placeholder of a secret-bearing message is a secret, every placeholder of a
//! look-alike is ordinary data.

/// Secret-bearing messages.
pub const SECRETS: &[(&str, &str)] = &[
    // 1. Credential words in other languages.
    (
        "language",
        "Error de autenticación: la contraseña {pw} no es válida para el usuario deploy",
    ),
    (
        "language",
        "Fehler: Kennwort für Benutzer backup lautet {pw} und ist abgelaufen",
    ),
    (
        "language",
        "Échec de connexion : mot de passe {pw} refusé par le serveur",
    ),
    (
        "language",
        "Falha no login: senha={pw} rejeitada pelo servidor",
    ),
    ("language", "Errore: la chiave API {b62:40} non è valida"),
    ("language", "Ошибка авторизации: пароль {pw} неверен"),
    ("language", "認証に失敗しました。パスワード: {pw}"),
    ("language", "身份验证失败：密钥 {b62:32} 已过期"),
    ("language", "인증 실패: 비밀번호 {pw} 가 올바르지 않습니다"),
    ("language", "Kimlik doğrulama hatası: şifre {pw} geçersiz"),
    ("language", "Błąd logowania: hasło {pw} jest nieprawidłowe"),
    ("language", "Aanmelden mislukt: wachtwoord {pw} is onjuist"),
    (
        "language",
        "La clave secreta {b64:40} fue revocada por el administrador",
    ),
    (
        "language",
        "{b62:32} ist der geheime Schlüssel, der abgelehnt wurde",
    ),
    ("language", "API-ключ: {b62:40} (доступ запрещён)"),
    ("language", "Token de acesso {b64u:43} expirou"),
    // 2. Encodings.
    (
        "encoding",
        "redirect failed: https://app.example.com/login?next=%2Fcallback%3Faccess_token%3D{b62:40}%26state%3Dxyz",
    ),
    (
        "encoding",
        "invalid DATABASE_URL: postgres%3A%2F%2Fapp%3A{pct:16}%40db.example.com%3A5432%2Fmain",
    ),
    (
        "encoding",
        "upstream said: {\"error\":\"{\\\"detail\\\":\\\"bad credentials\\\",\\\"client_secret\\\":\\\"{b62:40}\\\"}\"}",
    ),
    (
        "encoding",
        "log: \"{\\\"event\\\":\\\"auth\\\",\\\"payload\\\":\\\"{\\\\\\\"password\\\\\\\":\\\\\\\"{pw}\\\\\\\"}\\\"}\"",
    ),
    (
        "encoding",
        "kubectl apply failed: data:\n  credentials.json: {b64cred}",
    ),
    (
        "encoding",
        "secret GOOGLE_APPLICATION_CREDENTIALS_JSON={b64cred} could not be parsed",
    ),
    (
        "encoding",
        "<p>Login failed for &quot;svc&quot; with &quot;password&quot;: &quot;{pw}&quot;</p>",
    ),
    (
        "encoding",
        "render error near: {&#34;api_token&#34;:&#34;{b62:40}&#34;}",
    ),
    (
        "encoding",
        "callback=https%3A%2F%2Fhooks.example.com%2Fin%3Fsecret%3D{b62:32} returned 410",
    ),
    (
        "encoding",
        "SAMLRequest rejected; RelayState=https%3A%2F%2Fportal%2F%3Fpassword%3D{pct:14}",
    ),
    (
        "encoding",
        "form body: user=ops&pass%77ord={pct:16}&remember=1",
    ),
    (
        "encoding",
        "error payload \"{\\\"apiKey\\\": \\\"{b62:36}\\\"}\" was not accepted",
    ),
    (
        "encoding",
        "Authorization header from env (base64): {b64plain}",
    ),
    (
        "encoding",
        "config: {\\\"auth\\\":{\\\"secret\\\":\\\"{b64u:43}\\\"}}",
    ),
    // 3. Markup.
    (
        "markup",
        "SOAP fault: <Credentials><Username>svc</Username><Password>{pw}</Password></Credentials>",
    ),
    (
        "markup",
        "<add key=\"StorageSecret\" value=\"{b64:40}\" /> in web.config is invalid",
    ),
    (
        "markup",
        "<setting name=\"ApiToken\" serializeAs=\"String\"><value>{b62:40}</value></setting>",
    ),
    (
        "markup",
        "<server><id>nexus</id><username>ci</username><password>{pw}</password></server>",
    ),
    (
        "markup",
        "<property name=\"db.password\" value=\"{pw}\"/> could not be resolved",
    ),
    ("markup", "<entry key=\"clientSecret\">{b62:32}</entry>"),
    (
        "markup",
        "<ClientSecretValue>{az:40}</ClientSecretValue> rejected by AAD",
    ),
    (
        "markup",
        "<input type=\"hidden\" name=\"api_secret\" value=\"{b62:32}\">",
    ),
    (
        "markup",
        "<param><name>accessKey</name><value>{b62:40}</value></param>",
    ),
    (
        "markup",
        "<credential type=\"token\">{b64u:43}</credential>",
    ),
    ("markup", "<auth><apiKeyValue>{hex:40}</apiKeyValue></auth>"),
    ("markup", "<env name=\"REGISTRY_SECRET\">{b62:32}</env>"),
    (
        "markup",
        "<string name=\"maps_secret\">{b62:39}</string> in strings.xml",
    ),
    (
        "markup",
        "<SecretAccessKey>{b64:40}</SecretAccessKey> in AssumeRole response was logged",
    ),
    // 4. Line structure.
    (
        "lines",
        "invalid config:\npassword: |\n  {pw}\nhost: db.example.com",
    ),
    (
        "lines",
        "values.yaml:\n  apiSecret: >-\n    {b62:40}\n  replicas: 3",
    ),
    ("lines", "Key:\n  {b64:40}\nwas rejected by the server"),
    (
        "lines",
        "Name\tValue\nuser\tdeploy\npassword\t{pw}\nport\t5432",
    ),
    (
        "lines",
        "SETTING          VALUE\nadmin_user       root\nadmin_password   {pw}\nlisten           0.0.0.0:80",
    ),
    (
        "lines",
        "stunnel.conf: line 4: PSKsecrets missing; psk     {b62:32}",
    ),
    (
        "lines",
        "sshd_config: unknown option 'Password' with value\n    {pw}",
    ),
    (
        "lines",
        "[broker]\nhost = mq.example.com\nsecret\n  = {b62:32}",
    ),
    (
        "lines",
        "| key | value |\n|---|---|\n| api_token | {b62:40} |",
    ),
    ("lines", "client_secret\n{az:40}\n(copied from the portal)"),
    ("lines", "auth_token:\n\t{b64u:43}"),
    ("lines", "masterauth    {pw}\nmasterauth directive rejected"),
    ("lines", "requirepass  {b62:24}  # from redis.conf"),
    ("lines", "TOKEN\n-----\n{b62:40}\n-----"),
    // 5. Command lines.
    ("cli", "+ npx vercel deploy --prod --token {b62:24}"),
    ("cli", "gh auth login --with-token <<< {b62:36}: error"),
    (
        "cli",
        "openvpn --config client.ovpn --auth-user-pass creds.txt --askpass {pw}",
    ),
    (
        "cli",
        "exec: pg_dump 'host=db user=app password={pw} dbname=main' failed",
    ),
    (
        "cli",
        "+ echo {b62:40} | docker login ghcr.io -u ci --password-stdin",
    ),
    ("cli", "unzip -P {pw} archive.zip: incorrect password"),
    (
        "cli",
        "qpdf --password={pw} --decrypt in.pdf out.pdf: invalid password",
    ),
    (
        "cli",
        "zabbix_sender -z zbx.example.com --tls-psk-identity PSK01 --tls-psk-file /dev/stdin <<< {hex:64}",
    ),
    (
        "cli",
        "nmcli dev wifi connect Office password {pw}: secrets were required",
    ),
    ("cli", "+ export AWS_SESSION_TOKEN={b64:120}"),
    (
        "cli",
        "set -x: ++ curl -H 'PRIVATE-KEY: {b62:40}' https://api.example.com",
    ),
    ("cli", "runas /user:svc_sql {pw} failed with 1326"),
    (
        "cli",
        "psql postgresql://app@db/main?password={pw} -c 'select 1'",
    ),
    ("cli", "rar a -hp{pw} backup.rar dump.sql: cannot create"),
    (
        "cli",
        "ssh-add: passphrase {pw} incorrect for key id_ed25519",
    ),
    ("cli", "+ influx setup -u admin -p {pw} -o org -b bucket -f"),
    // 6. Protocol transcripts.
    (
        "protocol",
        "SMTP debug:\nC: AUTH PLAIN {b64plain}\nS: 535 5.7.8 Authentication credentials invalid",
    ),
    (
        "protocol",
        "IMAP: A001 LOGIN svc-mail {pw}\nA001 NO [AUTHENTICATIONFAILED] Invalid credentials",
    ),
    (
        "protocol",
        "ftp> USER deploy\n331 Password required\nftp> PASS {pw}\n530 Login incorrect.",
    ),
    (
        "protocol",
        "POP3 session: USER alice\n+OK\nPASS {pw}\n-ERR authentication failed",
    ),
    (
        "protocol",
        "SMTP debug:\nC: AUTH LOGIN\nS: 334 VXNlcm5hbWU6\nC: c3ZjLW1haWw=\nS: 334 UGFzc3dvcmQ6\nC: {b64plain}\nS: 535 Authentication failed",
    ),
    (
        "protocol",
        "ldap_bind: simple bind dn=cn=svc,dc=example,dc=com credentials={pw}: invalid (49)",
    ),
    (
        "protocol",
        "redis trace: \"AUTH\" \"default\" \"{b62:32}\" -> WRONGPASS",
    ),
    (
        "protocol",
        "mysql general log: Connect app@10.1.2.3 on main using password: YES; COM_CHANGE_USER app {pw}",
    ),
    (
        "protocol",
        "XMPP <auth mechanism='PLAIN'>{b64plain}</auth> <failure><not-authorized/></failure>",
    ),
    (
        "protocol",
        "memcached SASL: PLAIN {b64plain} -> auth failure",
    ),
    (
        "protocol",
        "> PASS {pw}\n< :irc.example.net 464 * :Password incorrect",
    ),
    (
        "protocol",
        "MQTT CONNECT client_id=sensor-7 username=dev password={b62:24} -> CONNACK 5",
    ),
    (
        "protocol",
        "pgwire: PasswordMessage(\"{pw}\") -> FATAL 28P01",
    ),
    (
        "protocol",
        "HTTP/1.1 trace: > Proxy-Authorization: Basic {b64plain}",
    ),
    // 7. Stack frames and error dumps.
    (
        "frames",
        "Traceback:\n  File \"/app/db.py\", line 40, in connect\n    conn = psycopg.connect(host, user, password)\n  locals: host='db' user='app' password='{pw}'",
    ),
    (
        "frames",
        "panic: auth failed\n\ngoroutine 1 [running]:\nmain.login(0xc000010000, {0xc00001, 0x8}, {\"{b62:32}\", 0x20})",
    ),
    (
        "frames",
        "java.lang.IllegalStateException: bad key\n\tat com.acme.Client.<init>(apiKey=\"{b62:40}\")",
    ),
    (
        "frames",
        "Fatal error: Uncaught Exception: denied in /srv/app/Db.php:12\n#0 /srv/app/index.php(7): Db->connect('db', 'app', '{pw}')",
    ),
    (
        "frames",
        "  File \"/app/main.py\", line 9, in <module>\n    client = Client(token=\"{b62:40}\")\nValueError: invalid token",
    ),
    (
        "frames",
        "RuntimeError at /login\nLocal vars:\n  username = 'admin'\n  secret = '{b62:32}'",
    ),
    (
        "frames",
        "thread 'main' panicked: called `Result::unwrap()` on an `Err` value: Auth { user: \"ci\", key: \"{b62:40}\" }",
    ),
    (
        "frames",
        "#1 0x55d5 in connect_db (user=0x7ff \"app\", passwd=0x7ff \"{pw}\") at db.c:88",
    ),
    (
        "frames",
        "System.Exception: failed\n   at Acme.Api.Call(String endpoint = \"/v1\", String apiToken = \"{b62:36}\")",
    ),
    (
        "frames",
        "ArgumentError: invalid\n  from app/client.rb:12:in `initialize'\n  @client_secret=\"{b62:32}\"",
    ),
    (
        "frames",
        "Error: 401\n    at request (client.js:10) { config: { auth: { username: 'bot', password: '{pw}' } } }",
    ),
    (
        "frames",
        "  #0 DB::connect(args=[\"db\", \"app\", \"{pw}\"])",
    ),
    (
        "frames",
        "dump: {'host': 'smtp.example.com', 'login': 'noreply', 'smtp_pass': '{pw}'}",
    ),
    (
        "frames",
        "[Warning] pool stats Map(url -> jdbc:oracle:thin:@db, user -> app, pwd -> {pw})",
    ),
    // 8. Key material in any armor.
    (
        "keys",
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: deploy\nPublic-Lines: 2\nAAAAC3NzaC1lZDI1NTE5AAAAIA\nPrivate-Lines: 1\n{b64:64}\nPrivate-MAC: {~hex:64}",
    ),
    (
        "keys",
        "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nComment: \"rsa-key\"\n{b64:64}\n{b64:64}\n---- END SSH2 ENCRYPTED PRIVATE KEY ----",
    ),
    (
        "keys",
        "wg-quick: [Interface]\nPrivateKey = {b64:43}=\nAddress = 10.8.0.2/24",
    ),
    (
        "keys",
        "JWK rejected: {\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"{~b64u:43}\",\"y\":\"{~b64u:43}\",\"d\":\"{b64u:43}\"}",
    ),
    (
        "keys",
        "Private-key-format: v1.3\nAlgorithm: 13 (ECDSAP256SHA256)\nPrivateKey: {b64:44}",
    ),
    (
        "keys",
        "named: key \"xfr-key\" { algorithm hmac-sha256; secret \"{b64:44}\"; };",
    ),
    (
        "keys",
        "untrusted comment: minisign encrypted secret key\n{b64:120}",
    ),
    (
        "keys",
        "-----BEGIN OpenVPN Static key V1-----\n{hex:64}\n{hex:64}\n-----END OpenVPN Static key V1-----",
    ),
    ("keys", "tor: HiddenServiceKey ED25519-V3:{b64:86}"),
    ("keys", "nostr: signing with nsec1{low:58}"),
    ("keys", "wallet import failed: xprv9s21ZrQH143K{b62:95}"),
    (
        "keys",
        "JWK: {\"kty\":\"oct\",\"kid\":\"hmac-1\",\"k\":\"{b64u:43}\"}",
    ),
    (
        "keys",
        "-----BEGIN PRIVATE KEY BLOCK-----\n{b64:64}\n-----END PRIVATE KEY BLOCK-----",
    ),
    (
        "keys",
        "keyfile: {\"address\":\"{~hex:40}\",\"privateKey\":\"0x{hex:64}\"}",
    ),
    // 9. URL paths.
    (
        "path",
        "GET https://api.example.com/v1/{b62:32}/messages returned 401",
    ),
    (
        "path",
        "POST https://hooks.example.com/hooks/catch/{b62:40} -> 410 Gone",
    ),
    (
        "path",
        "webhook https://outlook.example.com/callback/{b64u:43}/notify failed",
    ),
    (
        "path",
        "fetch https://ntfy.example.com/{b62:32}/json timed out",
    ),
    (
        "path",
        "https://api.telegram.example.org/bot{~up:10}:{b62:35}/sendMessage: 401 Unauthorized",
    ),
    (
        "path",
        "error sending to https://maker.example.com/trigger/deploy/with/key/{b62:22}",
    ),
    (
        "path",
        "GET https://tracker.example.com/announce/{hex:32}?info_hash=abc 403",
    ),
    (
        "path",
        "redis: cannot connect to https://db.example.io/v2/databases/prod/tokens/{b64u:43}",
    ),
    (
        "path",
        "request to https://ingest.example.com/api/v1/push/{b62:40}/logs failed",
    ),
    (
        "path",
        "https://cdn.example.com/private/{b62:32}/export.csv returned 403",
    ),
    (
        "path",
        "pushgateway url https://push.example.com/metrics/job/ci/secret/{b62:32} rejected",
    ),
    (
        "path",
        "git push https://git.example.com/{b62:40}/org/repo.git failed",
    ),
    (
        "path",
        "curl: (22) https://hc.example.io/ping/{b64u:43}/start returned 404",
    ),
    (
        "path",
        "webhook POST /api/webhooks/incoming/{b62:40} answered 401",
    ),
    // 10. Provider tokens with structure but no word.
    ("structure", "Dropbox call failed with sl.{b64u:130}"),
    ("structure", "Graph API error for EAAG{b62:150}"),
    (
        "structure",
        "headless login: tskey-auth-k{b62:16}-{b62:32} expired",
    ),
    ("structure", "failed to sync with lsv2_pt_{hex:32}_{hex:10}"),
    ("structure", "private app pat-na1-{uuid} revoked"),
    ("structure", "client rejected 1//0{b64u:100}"),
    (
        "structure",
        "login with MT{b62:22}.{b64u:6}.{b64u:38} failed",
    ),
    ("structure", "phx_{b62:43} lacks the project:read scope"),
    (
        "structure",
        "bkua_{hex:40} is not valid for this organization",
    ),
    ("structure", "sgp_{hex:40} expired"),
    (
        "structure",
        "pnu_{b62:36} does not have access to workspace",
    ),
    ("structure", "deploy used nfp_{b62:36} and was refused"),
    (
        "structure",
        "sk.eyJ1IjoiZXhhbXBsZSIsImEiOiJ{b64u:40}.{b64u:22} is a secret token",
    ),
    (
        "structure",
        "{b62:26}.{b64u:6}.{b64u:27} failed gateway identify",
    ),
    // 11. Headers named by a vendor.
    (
        "header",
        "request headers: X-Pinata-Secret: {b62:64}\nAccept: application/json",
    ),
    (
        "header",
        "> X-Algolia-API-Token: {hex:32}\n> X-Algolia-Application-Id: ABCD1234",
    ),
    ("header", "sent X-Cmc-Pro-Api: {uuid} got 401"),
    ("header", "X-Riot-Credential: RGAPI-{uuid} rejected"),
    (
        "header",
        "headers={'X-Hasura-Admin': '{b62:32}', 'Content-Type': 'application/json'}",
    ),
    ("header", "X-Postmark-Server: {uuid}\nHTTP 401"),
    (
        "header",
        "curl -H 'X-Rapid-Host: api.example.com' -H 'X-Rapid-Sub: {hex:50}'",
    ),
    ("header", "X-TYPESENSE-ADMIN: {b62:32} denied"),
    ("header", "Ocp-Apim-Subscription: {hex:32} invalid"),
    ("header", "> X-Storage-Pass: {b62:40}\n< HTTP/1.1 401"),
    ("header", "request had X-Buildkite-Agent: {b62:40}"),
    ("header", "X-Meili-Master: {b64u:43}"),
    ("header", "DD-APPLICATION: {hex:40} rejected by intake"),
    ("header", "X-ChatWork-Access: {hex:32} returned 401"),
];

/// Look-alikes: ordinary data that must come back unchanged.
pub const LOOKALIKES: &[(&str, &str)] = &[
    // 1. Languages: words about credentials, no credential.
    (
        "language",
        "La contraseña debe tener al menos 12 caracteres",
    ),
    (
        "language",
        "Das Kennwort ist abgelaufen, bitte ändern Sie es",
    ),
    (
        "language",
        "Mot de passe oublié ? Cliquez sur le lien envoyé",
    ),
    ("language", "A senha expira em 30 dias"),
    ("language", "Пароль изменён пользователем admin"),
    ("language", "パスワードを再設定してください"),
    ("language", "密码长度必须至少为 12 个字符"),
    ("language", "비밀번호가 변경되었습니다"),
    (
        "language",
        "Şifre sıfırlama isteği gönderildi: istek {~ulid}",
    ),
    ("language", "Hasło zostało zmienione dla konta jan.kowalski"),
    ("language", "Wachtwoord vergeten voor gebruiker pietje"),
    // 2. Encodings without a credential.
    (
        "encoding",
        "redirect to https://app.example.com/login?next=%2Fdashboard%3Ftab%3Dbilling%26page%3D2",
    ),
    (
        "encoding",
        "payload \"{\\\"trace_id\\\":\\\"{~hex:32}\\\",\\\"status\\\":\\\"ok\\\"}\"",
    ),
    (
        "encoding",
        "&lt;b&gt;Saved&lt;/b&gt; &amp; published revision {~hex:40}",
    ),
    (
        "encoding",
        "data: eyJzdGF0dXMiOiJvayIsInJlc3VsdCI6W119 (base64 of the reply)",
    ),
    (
        "encoding",
        "callback=https%3A%2F%2Fshop.example.com%2Forder%2F{~ulid}%2Fdone",
    ),
    ("encoding", "cursor=eyJpZCI6MTIzNH0%3D&limit=50"),
    ("encoding", "etag \"W/\\\"{~hex:32}\\\"\" did not match"),
    (
        "encoding",
        "search?q=password%20reset%20not%20working&lang=en",
    ),
    // 3. Markup without a credential.
    (
        "markup",
        "<PublicKeyId>{~up:20}</PublicKeyId> is not registered",
    ),
    (
        "markup",
        "<password-policy><min-length>12</min-length></password-policy>",
    ),
    (
        "markup",
        "<Key>uploads/2024/{~uuid}/report.pdf</Key><ETag>\"{~hex:32}\"</ETag>",
    ),
    (
        "markup",
        "<input type=\"password\" name=\"password\" autocomplete=\"current-password\">",
    ),
    (
        "markup",
        "<RequestId>{~up:16}</RequestId><HostId>{~b64:56}</HostId>",
    ),
    (
        "markup",
        "<dependency><artifactId>keycloak-core</artifactId><version>24.0.1</version></dependency>",
    ),
    ("markup", "<TraceId>{~hex:32}</TraceId>"),
    ("markup", "<add key=\"PageSize\" value=\"50\" />"),
    (
        "markup",
        "<SigningCertificate>-----BEGIN CERTIFICATE-----\n{~b64:64}\n-----END CERTIFICATE-----</SigningCertificate>",
    ),
    // 4. Line structure without a credential.
    (
        "lines",
        "password_policy:\n  min_length: 12\n  require_symbols: true",
    ),
    (
        "lines",
        "Name\tStatus\napi\tRunning\nworker\tCrashLoopBackOff",
    ),
    (
        "lines",
        "KEY              VALUE\nregion           eu-west-1\ninstance_type    t3.large",
    ),
    ("lines", "build id:\n  {~hex:40}"),
    ("lines", "commit\n{~hex:40}\nAuthor: Jane"),
    ("lines", "token_budget:\n  max: 4096\n  used: 1200"),
    ("lines", "keyring   default\nbackend   file"),
    ("lines", "Deployment\n  {~ulid}\nfinished in 42s"),
    // 5. Command lines without a credential.
    ("cli", "+ docker push ghcr.io/acme/api:{~hex:12}"),
    ("cli", "+ git checkout {~hex:40}"),
    (
        "cli",
        "ssh-keygen -t ed25519 -C ci@example.com -f ~/.ssh/id_ci",
    ),
    (
        "cli",
        "pip install --require-hashes -r requirements.txt: hash sha256:{~hex:64} mismatch",
    ),
    (
        "cli",
        "+ kubectl rollout restart deployment/api --namespace prod",
    ),
    ("cli", "gpg --recv-keys {~HEX:40}"),
    ("cli", "passwd: password updated successfully"),
    ("cli", "tar -czf backup-{~ulid}.tar.gz /srv/data"),
    ("cli", "+ aws s3 cp s3://assets/builds/{~hex:40}/app.zip ."),
    (
        "cli",
        "ssh -i ~/.ssh/deploy_key -p 2222 deploy@bastion.example.com",
    ),
    // 6. Protocol transcripts without a credential.
    (
        "protocol",
        "SMTP: 250-AUTH PLAIN LOGIN XOAUTH2\n250 SIZE 35882577",
    ),
    ("protocol", "S: 334 VXNlcm5hbWU6"),
    (
        "protocol",
        "IMAP: * OK [CAPABILITY IMAP4rev1 AUTH=PLAIN] ready",
    ),
    (
        "protocol",
        "ftp> PASV\n227 Entering Passive Mode (203,0,113,5,195,80)",
    ),
    ("protocol", "< 250 2.0.0 Ok: queued as {~up:10}"),
    ("protocol", "Message-ID: <{~ulid}@mail.example.com>"),
    ("protocol", "redis: \"GET\" \"session:{~uuid}\" -> nil"),
    (
        "protocol",
        "< HTTP/1.1 401 Unauthorized\n< WWW-Authenticate: Basic realm=\"api\"",
    ),
    // 7. Frames without a credential.
    (
        "frames",
        "  File \"/app/main.py\", line 9, in <module>\n    client = Client(timeout=30)\nValueError: bad timeout",
    ),
    (
        "frames",
        "main.handler(0xc000010000, {0xc00001, 0x8})\n\t/app/main.go:42 +0x1d",
    ),
    (
        "frames",
        "Local vars:\n  username = 'admin'\n  attempts = 3",
    ),
    (
        "frames",
        "thread 'main' panicked: Err(NotFound { key: \"users/42/avatar.png\" })",
    ),
    ("frames", "#0 Cache->get('{~hex:32}')"),
    (
        "frames",
        "dump: {'host': 'smtp.example.com', 'port': 587, 'passive': True}",
    ),
    ("frames", "args: {request_id: '{~ksuid}', retries: 2}"),
    ("frames", "panic: keyspace {~low:12} not found"),
    // 8. Public key material.
    (
        "keys",
        "-----BEGIN PUBLIC KEY-----\n{~b64:64}\n-----END PUBLIC KEY-----",
    ),
    (
        "keys",
        "known_hosts: bastion ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{~b64:43}",
    ),
    (
        "keys",
        "[Peer]\nPublicKey = {~b64:43}=\nAllowedIPs = 10.8.0.0/24",
    ),
    (
        "keys",
        "JWKS: {\"kty\":\"EC\",\"crv\":\"P-256\",\"kid\":\"{~b64u:22}\",\"x\":\"{~b64u:43}\",\"y\":\"{~b64u:43}\"}",
    ),
    (
        "keys",
        "-----BEGIN CERTIFICATE-----\n{~b64:64}\n-----END CERTIFICATE-----",
    ),
    (
        "keys",
        "untrusted comment: minisign public key {~HEX:16}\nRWQ{~b64:53}",
    ),
    ("keys", "public_key_id: {~hex:16}"),
    ("keys", "publicKey: {~b64:44}"),
    ("keys", "npub1{~low:58} followed you"),
    (
        "keys",
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n{~b64:64}\n-----END PGP PUBLIC KEY BLOCK-----",
    ),
    ("keys", "DNSKEY 257 3 13 {~b64:88}"),
    // 9. URL paths without a credential.
    (
        "path",
        "GET https://api.example.com/v1/orders/{~ulid} returned 404",
    ),
    (
        "path",
        "GET https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz returned 503",
    ),
    (
        "path",
        "https://s3.example.com/bucket/builds/{~hex:40}/app.tar.gz returned 403",
    ),
    (
        "path",
        "fetch https://cdn.example.com/assets/app.{~hex:8}.js failed",
    ),
    (
        "path",
        "GET https://api.example.com/v2/users/{~uuid}/avatar 404",
    ),
    (
        "path",
        "https://example.com/blog/2024/why-passkeys-matter returned 500",
    ),
    ("path", "GET /repos/acme/api/commits/{~hex:40}/status 422"),
    (
        "path",
        "https://hub.example.com/v2/library/nginx/manifests/sha256:{~hex:64}",
    ),
    (
        "path",
        "GET https://api.example.com/items/{~nano}/comments 404",
    ),
    // 10. Ids with structure, not credentials.
    ("structure", "deployment dpl_{~b62:28} is ready"),
    ("structure", "trace {~hex:32} span {~hex:16}"),
    ("structure", "event {~ksuid} processed"),
    ("structure", "job {~ulid} failed after 3 attempts"),
    (
        "structure",
        "pk.eyJ1IjoiZXhhbXBsZSIsImEiOiJ{~b64u:20}.{~b64u:22} is a public token",
    ),
    ("structure", "go.sum: example.com/mod v1.2.3 h1:{~b64:43}="),
    (
        "structure",
        "integrity sha512-{~b64:86}== mismatch for lodash",
    ),
    ("structure", "checksum = \"{~hex:64}\" (Cargo.lock)"),
    ("structure", "cache key node-modules-{~hex:64} restored"),
    ("structure", "object id {~nano} not found"),
    (
        "structure",
        "phc_{~b62:43} is the project key used by the browser snippet",
    ),
    ("structure", "build #{~up:8}-{~hex:7} finished"),
    // 11. Headers that are not secrets.
    ("header", "traceparent: 00-{~hex:32}-{~hex:16}-01"),
    ("header", "X-B3-TraceId: {~hex:32}\nX-B3-SpanId: {~hex:16}"),
    ("header", "X-Cloud-Trace-Context: {~hex:32}/1234567890;o=1"),
    ("header", "uber-trace-id: {~hex:16}:{~hex:16}:0:1"),
    ("header", "X-Amzn-Trace-Id: Root=1-{~hex:8}-{~hex:24}"),
    ("header", "X-Request-Id: {~uuid}"),
    ("header", "ETag: \"{~hex:40}\""),
    ("header", "X-Correlation-Id: {~ulid}"),
    ("header", "Content-MD5: {~b64:22}=="),
    ("header", "X-Amz-Cf-Id: {~b64u:56}=="),
    (
        "header",
        "X-GitHub-Request-Id: {~HEX:4}:{~HEX:5}:{~HEX:6}:{~HEX:7}:{~HEX:8}",
    ),
    ("header", "X-Algolia-Application-Id: {~up:10}"),
    ("header", "Digest: sha-256={~b64:43}="),
    ("header", "X-Deployment-Id: {~ulid}"),
];
