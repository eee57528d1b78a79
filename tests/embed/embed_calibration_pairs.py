"""Hand-written sentence sets used to measure embedder threshold profiles.

Each entry is ``(anchor, paraphrase, related, question)``:

* ``paraphrase`` states the same memory in other words  → should be ``>= same``;
* ``related`` is about the same topic/entity, but a different fact
  → should fall in ``[related, same)``;
* ``question`` is a recall query answered by the anchor.

Unrelated pairs are formed from anchors of *different* entries.
"""

from __future__ import annotations

Entry = tuple[str, str, str, str]

EN: list[Entry] = [
    (
        "The user prefers dark mode in their code editor.",
        "In the code editor, the user likes to use a dark theme.",
        "The user set the code editor font size to 16 points.",
        "Which color theme does the user like in the editor?",
    ),
    (
        "Maria is allergic to peanuts.",
        "Peanuts cause an allergic reaction in Maria.",
        "Maria does not eat meat and follows a vegetarian diet.",
        "What food allergy does Maria have?",
    ),
    (
        "The project deadline was moved to March 15.",
        "The due date for the project is now the fifteenth of March.",
        "The project budget was increased by ten percent.",
        "When is the project due?",
    ),
    (
        "Tom's daughter started school in Berlin this September.",
        "This September, Tom's daughter began attending a school in Berlin.",
        "Tom's son plays football in a club every weekend.",
        "Where does Tom's daughter go to school?",
    ),
    (
        "The production database runs PostgreSQL 15 on a dedicated server.",
        "Our production DB is PostgreSQL version 15, hosted on its own machine.",
        "The staging database is refreshed from a production backup every night.",
        "Which database version does production use?",
    ),
    (
        "The user wants answers to be short and without bullet points.",
        "Keep replies brief, and don't use bulleted lists for this user.",
        "The user asked for code examples to always include type hints.",
        "How does the user want responses formatted?",
    ),
    (
        "Anna moved from Munich to Lisbon last year.",
        "Last year Anna relocated to Lisbon; she used to live in Munich.",
        "Anna is learning Portuguese with a private tutor.",
        "Where does Anna live now?",
    ),
    (
        "The team's weekly sync is on Tuesdays at 10 am.",
        "Every Tuesday at ten in the morning the team holds its weekly meeting.",
        "The team's quarterly planning happens off-site in a hotel.",
        "When is the weekly team meeting?",
    ),
    (
        "The API rate limit is 100 requests per minute per key.",
        "Each key may make at most one hundred API calls per minute.",
        "API keys expire after 90 days and must be rotated.",
        "What is the rate limit of the API?",
    ),
    (
        "The user's cat is named Miso and is eight years old.",
        "Miso, the user's cat, is eight.",
        "The user is thinking about adopting a second cat from a shelter.",
        "What is the name of the user's cat?",
    ),
    (
        "The build fails on Windows because of a path length limit.",
        "On Windows the build breaks since file paths get too long.",
        "The macOS build takes twice as long as the Linux build.",
        "Why does the Windows build fail?",
    ),
    (
        "Jonas prefers to be contacted by email rather than by phone.",
        "Email is Jonas's preferred way to be reached, not phone calls.",
        "Jonas works remotely from a small village near Hamburg.",
        "How should Jonas be contacted?",
    ),
    (
        "The company switched its cloud provider from AWS to Google Cloud.",
        "The firm migrated from Amazon Web Services to GCP.",
        "The company's cloud bill grew by thirty percent last quarter.",
        "Which cloud provider does the company use?",
    ),
    (
        "The user is training for a marathon in October.",
        "In October the user will run a marathon and is preparing for it.",
        "The user injured their knee while running last spring.",
        "What race is the user training for?",
    ),
    (
        "The invoice for order 4521 was paid on June 3.",
        "Order 4521's invoice got settled on the third of June.",
        "Order 4521 was shipped with express delivery to Vienna.",
        "When was the invoice for order 4521 paid?",
    ),
    (
        "Lena's favourite book is One Hundred Years of Solitude.",
        "The book Lena loves most is One Hundred Years of Solitude by Garcia Marquez.",
        "Lena is reading a biography of Marie Curie at the moment.",
        "What is Lena's favourite book?",
    ),
    (
        "The service logs are kept for thirty days and then deleted.",
        "Logs from the service are retained for 30 days before deletion.",
        "The service sends error alerts to the on-call channel in Slack.",
        "How long are service logs kept?",
    ),
    (
        "The user drinks coffee without sugar but with oat milk.",
        "The user takes their coffee with oat milk and no sugar.",
        "The user stops drinking coffee after 3 pm to sleep better.",
        "How does the user take their coffee?",
    ),
    (
        "The wedding will take place in Porto on the 12th of August.",
        "On August 12 the wedding is happening in Porto.",
        "The wedding guests can stay at a hotel near the beach.",
        "Where and when is the wedding?",
    ),
    (
        "The frontend is written in TypeScript with React.",
        "React and TypeScript are used to build the frontend.",
        "The frontend is deployed to a CDN after every merge.",
        "What technology is the frontend built with?",
    ),
]

DE: list[Entry] = [
    (
        "Der Nutzer bevorzugt im Code-Editor den dunklen Modus.",
        "Im Code-Editor verwendet der Nutzer am liebsten ein dunkles Farbschema.",
        "Der Nutzer hat die Schriftgröße im Code-Editor auf 16 Punkt gestellt.",
        "Welches Farbschema mag der Nutzer im Editor?",
    ),
    (
        "Maria ist allergisch gegen Erdnüsse.",
        "Erdnüsse lösen bei Maria eine allergische Reaktion aus.",
        "Maria isst kein Fleisch und ernährt sich vegetarisch.",
        "Welche Lebensmittelallergie hat Maria?",
    ),
    (
        "Die Projektfrist wurde auf den 15. März verschoben.",
        "Das Projekt muss jetzt bis zum fünfzehnten März fertig sein.",
        "Das Projektbudget wurde um zehn Prozent erhöht.",
        "Wann ist das Projekt fällig?",
    ),
    (
        "Toms Tochter geht seit diesem September in Berlin zur Schule.",
        "Seit September besucht Toms Tochter eine Schule in Berlin.",
        "Toms Sohn spielt jedes Wochenende in einem Verein Fußball.",
        "Wo geht Toms Tochter zur Schule?",
    ),
    (
        "Die Produktionsdatenbank läuft mit PostgreSQL 15 auf einem eigenen Server.",
        "Unsere Produktiv-DB ist PostgreSQL Version 15 auf einer dedizierten Maschine.",
        "Die Staging-Datenbank wird jede Nacht aus einem Produktions-Backup neu befüllt.",
        "Welche Datenbankversion nutzt die Produktion?",
    ),
    (
        "Der Nutzer möchte kurze Antworten ohne Aufzählungspunkte.",
        "Antworten für diesen Nutzer sollen knapp sein und keine Stichpunktlisten enthalten.",
        "Der Nutzer wünscht, dass Codebeispiele immer Typannotationen enthalten.",
        "Wie sollen Antworten für den Nutzer formatiert sein?",
    ),
    (
        "Anna ist letztes Jahr von München nach Lissabon gezogen.",
        "Letztes Jahr hat Anna München verlassen und wohnt jetzt in Lissabon.",
        "Anna lernt mit einer Privatlehrerin Portugiesisch.",
        "Wo wohnt Anna jetzt?",
    ),
    (
        "Das wöchentliche Teamtreffen ist dienstags um 10 Uhr.",
        "Jeden Dienstag um zehn Uhr morgens trifft sich das Team zur Wochenbesprechung.",
        "Die Quartalsplanung des Teams findet in einem Hotel außerhalb statt.",
        "Wann ist das wöchentliche Teamtreffen?",
    ),
    (
        "Das API-Limit liegt bei 100 Anfragen pro Minute und Schlüssel.",
        "Mit jedem Schlüssel darf man höchstens hundert API-Aufrufe pro Minute machen.",
        "API-Schlüssel laufen nach 90 Tagen ab und müssen erneuert werden.",
        "Wie hoch ist das Ratenlimit der API?",
    ),
    (
        "Die Katze des Nutzers heißt Miso und ist acht Jahre alt.",
        "Miso, die Katze des Nutzers, ist acht.",
        "Der Nutzer überlegt, eine zweite Katze aus dem Tierheim zu holen.",
        "Wie heißt die Katze des Nutzers?",
    ),
    (
        "Der Build schlägt unter Windows wegen der Pfadlängenbegrenzung fehl.",
        "Unter Windows bricht der Build ab, weil die Dateipfade zu lang werden.",
        "Der macOS-Build dauert doppelt so lange wie der Linux-Build.",
        "Warum schlägt der Windows-Build fehl?",
    ),
    (
        "Jonas möchte lieber per E-Mail als per Telefon kontaktiert werden.",
        "Jonas ist am liebsten per E-Mail erreichbar, nicht über Anrufe.",
        "Jonas arbeitet remote aus einem kleinen Dorf bei Hamburg.",
        "Wie sollte man Jonas kontaktieren?",
    ),
    (
        "Die Firma hat ihren Cloud-Anbieter von AWS zu Google Cloud gewechselt.",
        "Das Unternehmen ist von Amazon Web Services auf GCP umgezogen.",
        "Die Cloud-Rechnung der Firma ist im letzten Quartal um dreißig Prozent gestiegen.",
        "Welchen Cloud-Anbieter nutzt die Firma?",
    ),
    (
        "Der Nutzer trainiert für einen Marathon im Oktober.",
        "Im Oktober läuft der Nutzer einen Marathon und bereitet sich darauf vor.",
        "Der Nutzer hat sich letzten Frühling beim Laufen am Knie verletzt.",
        "Für welches Rennen trainiert der Nutzer?",
    ),
    (
        "Die Rechnung für Bestellung 4521 wurde am 3. Juni bezahlt.",
        "Die Rechnung zur Bestellung 4521 wurde am dritten Juni beglichen.",
        "Bestellung 4521 wurde per Expressversand nach Wien geschickt.",
        "Wann wurde die Rechnung für Bestellung 4521 bezahlt?",
    ),
    (
        "Lenas Lieblingsbuch ist Hundert Jahre Einsamkeit.",
        "Das Buch, das Lena am meisten liebt, ist Hundert Jahre Einsamkeit von García Márquez.",
        "Lena liest gerade eine Biografie über Marie Curie.",
        "Was ist Lenas Lieblingsbuch?",
    ),
    (
        "Die Logs des Dienstes werden dreißig Tage aufbewahrt und dann gelöscht.",
        "Dienst-Logs bleiben 30 Tage gespeichert, bevor sie gelöscht werden.",
        "Der Dienst schickt Fehlermeldungen an den Bereitschaftskanal in Slack.",
        "Wie lange werden die Logs des Dienstes aufbewahrt?",
    ),
    (
        "Der Nutzer trinkt Kaffee ohne Zucker, aber mit Hafermilch.",
        "Der Nutzer nimmt seinen Kaffee mit Hafermilch und ohne Zucker.",
        "Der Nutzer trinkt nach 15 Uhr keinen Kaffee mehr, um besser zu schlafen.",
        "Wie trinkt der Nutzer seinen Kaffee?",
    ),
    (
        "Die Hochzeit findet am 12. August in Porto statt.",
        "Am 12. August wird in Porto geheiratet.",
        "Die Hochzeitsgäste können in einem Hotel in Strandnähe übernachten.",
        "Wo und wann ist die Hochzeit?",
    ),
    (
        "Das Frontend ist in TypeScript mit React geschrieben.",
        "Für das Frontend werden React und TypeScript verwendet.",
        "Das Frontend wird nach jedem Merge auf ein CDN ausgerollt.",
        "Mit welcher Technologie ist das Frontend gebaut?",
    ),
]

ZH: list[Entry] = [
    (
        "用户在代码编辑器里喜欢用深色模式。",
        "在代码编辑器中，用户偏好深色主题。",
        "用户把代码编辑器的字号设成了16号。",
        "用户在编辑器里喜欢什么配色？",
    ),
    (
        "玛丽亚对花生过敏。",
        "花生会让玛丽亚产生过敏反应。",
        "玛丽亚不吃肉，是素食者。",
        "玛丽亚对什么食物过敏？",
    ),
    (
        "项目截止日期推迟到了3月15日。",
        "这个项目现在的交付日期是三月十五号。",
        "项目预算增加了百分之十。",
        "项目什么时候到期？",
    ),
    (
        "汤姆的女儿今年九月开始在柏林上学。",
        "今年九月起，汤姆的女儿在柏林的一所学校读书。",
        "汤姆的儿子每个周末都在俱乐部踢足球。",
        "汤姆的女儿在哪里上学？",
    ),
    (
        "生产数据库在一台专用服务器上运行PostgreSQL 15。",
        "我们的生产库是PostgreSQL 15版本，部署在独立的机器上。",
        "预发布数据库每晚都会用生产环境的备份重新导入。",
        "生产环境用的是哪个数据库版本？",
    ),
    (
        "用户希望回答简短，不要使用项目符号。",
        "给这位用户的回复要简洁，别用列表符号。",
        "用户要求代码示例始终带上类型注解。",
        "用户希望回答采用什么格式？",
    ),
    (
        "安娜去年从慕尼黑搬到了里斯本。",
        "去年安娜离开慕尼黑，现在住在里斯本。",
        "安娜正在跟一位私人老师学葡萄牙语。",
        "安娜现在住在哪里？",
    ),
    (
        "团队每周例会在周二上午十点。",
        "每个星期二早上十点，团队开周会。",
        "团队的季度规划会在外地的一家酒店举行。",
        "团队周会是什么时候？",
    ),
    (
        "API的速率限制是每个密钥每分钟100次请求。",
        "每个密钥每分钟最多只能调用一百次接口。",
        "API密钥90天后过期，需要轮换。",
        "API的速率限制是多少？",
    ),
    (
        "用户的猫叫味噌，今年八岁。",
        "味噌是用户养的猫，已经八岁了。",
        "用户在考虑从收容所再领养一只猫。",
        "用户的猫叫什么名字？",
    ),
    (
        "由于路径长度限制，构建在Windows上失败。",
        "在Windows上构建会中断，因为文件路径太长。",
        "macOS上的构建时间是Linux的两倍。",
        "为什么Windows构建会失败？",
    ),
    (
        "约纳斯更喜欢通过电子邮件而不是电话联系。",
        "联系约纳斯最好发邮件，不要打电话。",
        "约纳斯在汉堡附近的一个小村庄远程办公。",
        "应该怎样联系约纳斯？",
    ),
    (
        "公司把云服务商从AWS换成了谷歌云。",
        "这家公司已经从亚马逊云迁移到了GCP。",
        "公司上个季度的云账单增长了百分之三十。",
        "公司用的是哪家云服务商？",
    ),
    (
        "用户正在为十月的马拉松做训练。",
        "用户十月要跑马拉松，正在准备。",
        "用户去年春天跑步时伤了膝盖。",
        "用户在为什么比赛做训练？",
    ),
    (
        "订单4521的发票已于6月3日付清。",
        "4521号订单的发票在六月三号结清了。",
        "订单4521用特快专递寄往了维也纳。",
        "订单4521的发票是什么时候付的？",
    ),
    (
        "莉娜最喜欢的书是《百年孤独》。",
        "莉娜最爱的一本书是马尔克斯的《百年孤独》。",
        "莉娜最近在读一本居里夫人的传记。",
        "莉娜最喜欢哪本书？",
    ),
    (
        "服务日志保存三十天，之后删除。",
        "该服务的日志会保留30天，然后被清除。",
        "服务会把错误告警发到Slack的值班频道。",
        "服务日志保存多久？",
    ),
    (
        "用户喝咖啡不加糖，但要加燕麦奶。",
        "用户的咖啡要放燕麦奶，不放糖。",
        "为了睡得更好，用户下午三点以后不喝咖啡。",
        "用户喝咖啡有什么习惯？",
    ),
    (
        "婚礼将于8月12日在波尔图举行。",
        "8月12号，婚礼在波尔图举办。",
        "婚礼宾客可以住在海滩附近的酒店。",
        "婚礼在哪里、什么时候举行？",
    ),
    (
        "前端是用TypeScript和React写的。",
        "前端开发使用的是React和TypeScript。",
        "每次合并后，前端都会部署到CDN上。",
        "前端用什么技术构建？",
    ),
]

RU: list[Entry] = [
    (
        "Пользователь предпочитает тёмную тему в редакторе кода.",
        "В редакторе кода пользователь любит использовать тёмное оформление.",
        "Пользователь установил в редакторе кода размер шрифта 16 пунктов.",
        "Какую цветовую тему пользователь любит в редакторе?",
    ),
    (
        "У Марии аллергия на арахис.",
        "Арахис вызывает у Марии аллергическую реакцию.",
        "Мария не ест мясо и придерживается вегетарианской диеты.",
        "На какую еду у Марии аллергия?",
    ),
    (
        "Срок сдачи проекта перенесли на 15 марта.",
        "Теперь проект нужно сдать к пятнадцатому марта.",
        "Бюджет проекта увеличили на десять процентов.",
        "Когда нужно сдать проект?",
    ),
    (
        "Дочь Тома с этого сентября учится в школе в Берлине.",
        "С сентября дочь Тома ходит в берлинскую школу.",
        "Сын Тома каждые выходные играет в футбол в клубе.",
        "Где учится дочь Тома?",
    ),
    (
        "Рабочая база данных работает на PostgreSQL 15 на выделенном сервере.",
        "Наша продакшн-база — это PostgreSQL версии 15 на отдельной машине.",
        "Тестовую базу каждую ночь заново заполняют из резервной копии продакшна.",
        "Какая версия базы данных используется в продакшне?",
    ),
    (
        "Пользователь хочет короткие ответы без маркированных списков.",
        "Этому пользователю нужно отвечать кратко и не использовать списки с пунктами.",
        "Пользователь просит, чтобы в примерах кода всегда были аннотации типов.",
        "Как пользователь хочет, чтобы были оформлены ответы?",
    ),
    (
        "В прошлом году Анна переехала из Мюнхена в Лиссабон.",
        "Анна в прошлом году уехала из Мюнхена и теперь живёт в Лиссабоне.",
        "Анна учит португальский с частным преподавателем.",
        "Где сейчас живёт Анна?",
    ),
    (
        "Еженедельная встреча команды проходит по вторникам в 10 утра.",
        "Каждый вторник в десять утра команда собирается на недельную планёрку.",
        "Квартальное планирование команда проводит в загородном отеле.",
        "Когда проходит еженедельная встреча команды?",
    ),
    (
        "Лимит API — 100 запросов в минуту на один ключ.",
        "С одного ключа можно делать не больше ста вызовов API в минуту.",
        "Ключи API истекают через 90 дней, и их нужно менять.",
        "Какой лимит запросов у API?",
    ),
    (
        "Кошку пользователя зовут Мисо, ей восемь лет.",
        "Мисо, кошке пользователя, восемь лет.",
        "Пользователь думает взять из приюта вторую кошку.",
        "Как зовут кошку пользователя?",
    ),
    (
        "Сборка на Windows падает из-за ограничения длины пути.",
        "На Windows сборка ломается, потому что пути к файлам слишком длинные.",
        "Сборка на macOS идёт в два раза дольше, чем на Linux.",
        "Почему падает сборка на Windows?",
    ),
    (
        "Йонас предпочитает, чтобы с ним связывались по почте, а не по телефону.",
        "С Йонасом лучше связываться по электронной почте, а не звонить.",
        "Йонас работает удалённо из маленькой деревни под Гамбургом.",
        "Как лучше связаться с Йонасом?",
    ),
    (
        "Компания сменила облачного провайдера с AWS на Google Cloud.",
        "Фирма перешла с Amazon Web Services на GCP.",
        "Счёт компании за облако вырос на тридцать процентов в прошлом квартале.",
        "Каким облачным провайдером пользуется компания?",
    ),
    (
        "Пользователь готовится к марафону в октябре.",
        "В октябре пользователь побежит марафон и сейчас тренируется к нему.",
        "Прошлой весной пользователь повредил колено во время пробежки.",
        "К какому забегу готовится пользователь?",
    ),
    (
        "Счёт по заказу 4521 оплатили 3 июня.",
        "Счёт за заказ 4521 был оплачен третьего июня.",
        "Заказ 4521 отправили экспресс-доставкой в Вену.",
        "Когда оплатили счёт по заказу 4521?",
    ),
    (
        "Любимая книга Лены — «Сто лет одиночества».",
        "Больше всего Лена любит книгу Маркеса «Сто лет одиночества».",
        "Сейчас Лена читает биографию Марии Кюри.",
        "Какая у Лены любимая книга?",
    ),
    (
        "Логи сервиса хранятся тридцать дней, потом удаляются.",
        "Журналы сервиса хранятся 30 дней, после чего их стирают.",
        "Сервис отправляет оповещения об ошибках в дежурный канал в Slack.",
        "Сколько хранятся логи сервиса?",
    ),
    (
        "Пользователь пьёт кофе без сахара, но с овсяным молоком.",
        "Пользователь пьёт кофе с овсяным молоком и без сахара.",
        "Пользователь не пьёт кофе после трёх часов дня, чтобы лучше спать.",
        "Какой кофе пьёт пользователь?",
    ),
    (
        "Свадьба состоится в Порту 12 августа.",
        "12 августа в Порту будет свадьба.",
        "Гости свадьбы могут остановиться в отеле у пляжа.",
        "Где и когда будет свадьба?",
    ),
    (
        "Фронтенд написан на TypeScript с использованием React.",
        "Для фронтенда используются React и TypeScript.",
        "Фронтенд выкатывается на CDN после каждого слияния.",
        "На какой технологии сделан фронтенд?",
    ),
]

LANGUAGES: dict[str, list[Entry]] = {"en": EN, "de": DE, "zh": ZH, "ru": RU}
